from django.apps import AppConfig


class LabConfig(AppConfig):
    """The research harness: benchmarks, the seeder and the evaluation.

    Installed only when `DELLM_LAB=1` (tests, `make bench`, `make eval`): it
    drops indexes and takes exclusive table locks, so it never ships as part
    of the product. Product apps never import it (import-linter, `make lint`).
    """

    name = "lab"
    default_auto_field = "django.db.models.BigAutoField"
