"""The admin REST API, the policies it sets and what they enforce, topic lifecycle, stats
and metrics."""
