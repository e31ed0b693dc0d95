"""Evidence tables: the columnar hand-over from reassembly and the log readers to the fact
layer, partitioned by session (:mod:`.tables`, :mod:`.store`)."""
