"""User tools behind `pgcdc` subcommands that are not the pipeline itself (e.g. `decode`)."""
