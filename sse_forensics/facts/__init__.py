"""Facts: the reassembled capture turned into polars tables (``sessions``, ``streams``,
``events``, ``resumes``, ``gaps``, ``signals``, ``requests``). All protocol judgement — ID
arithmetic, signal coverage, evidence completeness — happens here, once; rules only read."""
