"""Where the lake lives and how it is reached: storage settings and delta-rs options
(storage), Hadoop file operations and exactly-once batch files (files), the writer lease."""
