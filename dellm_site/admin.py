from django.contrib import admin


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Rows written only by services (messages, the deletion audit): staff look, never edit."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
