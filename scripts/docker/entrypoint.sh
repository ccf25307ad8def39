#!/bin/sh
# PGCDC_SPARK_JARS is a list, so it is built from the image's jar directory at start.
set -e
if [ -z "$PGCDC_SPARK_JARS" ]; then
  PGCDC_SPARK_JARS="$(ls -d /opt/pgcdc/jars/*.jar | paste -sd, -)"
  export PGCDC_SPARK_JARS
fi
exec "$@"
