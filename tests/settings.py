"""Settings for pytest: the product's settings with the lab installed (its commands are under test).

`DELLM_LAB` goes into the environment before the settings are read, so child
processes (Celery workers, `manage.py` subprocesses) install the lab too.

`make test` runs the suite in parallel processes (pytest-xdist): each uses a
test database of its own (pytest-django's `_gw<N>` suffix) and is an instance
of its own on the shared Redis, with its own prefix (core/redis_ns.py), which
its children (Celery workers) derive the same way.
"""

import hashlib
import os

from dellm_site import embedded

os.environ["DELLM_LAB"] = "1"
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    # The suite's prefix (the runner's, exported by core.redis_ns) with the process's name after it; a child
    # inherits the result, and one told another prefix (another instance, in a test) keeps it apart too.
    suite = hashlib.sha256(str(embedded.data_dir()).encode()).hexdigest()[:8]
    prefix = os.environ.get("DELLM_REDIS_PREFIX") or f"dellm-test-{suite}"
    if not prefix.endswith(f"-{worker}"):
        os.environ["DELLM_REDIS_PREFIX"] = f"{prefix}-{worker}"

from dellm_site.settings import *  # noqa: F403

# Two partitions, not 16: the same pruning and keys (tests/chat/test_partition_pruning.py), with an eighth
# of the relations to create and truncate between tests.
DELLM_PARTITIONS = 2
