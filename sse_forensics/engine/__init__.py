"""Engine: loads the declarative rule files (``rules/*.toml``) and evaluates them over the
fact tables. A rule never touches a parser (Zeek: the event engine is not the policy)."""
