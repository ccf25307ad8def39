"""Running the merge job: its settings (config), the streaming query and batch processor
(job, history_job), its console lines, the Spark session, spark-submit (submit)."""
