"""Call log: schema, background writer with spool, migrations and latency reports."""
