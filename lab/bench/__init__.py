"""Benchmarks at scale: a COPY-based seeder of synthetic histories and the measurements of `manage.py dellm_bench`."""
