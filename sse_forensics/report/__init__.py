"""Report: findings and timelines rendered as JSON, JSONL or rich terminal tables. Every
captured string is attacker-controlled: it is escaped before it reaches a terminal."""
