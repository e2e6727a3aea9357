"""Settings for pytest: the product's settings with the lab installed (its commands are under test).

`DELLM_LAB` goes into the environment before the settings are read, so child
processes (Celery workers, `manage.py` subprocesses) install the lab too.
"""

import os

os.environ["DELLM_LAB"] = "1"

from dellm_site.settings import *  # noqa: F403

# Two partitions, not 16: the same pruning and keys (tests/chat/test_partition_pruning.py), with an eighth
# of the relations to create and truncate between tests.
DELLM_PARTITIONS = 2
