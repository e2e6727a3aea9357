from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("provenance", "0002_deletion_receipt"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="deletionrequest",
            options={
                "ordering": ["-created_at", "-id"],
                "permissions": [
                    ("run_subject_deletion", "Can run a deletion on a user's behalf (data-subject request)")
                ],
            },
        ),
    ]
