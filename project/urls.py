"""URL routes. Every route requires login (core.middleware) except login itself, /healthz and /favicon.ico.

datasets.urls and training.urls belong to their apps; training.urls serves "" (the dashboard
home page: programs one click from a launch, recent runs).
"""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from api import urls as api_urls
from api import views as api_views
from core import views as core_views
from core.login_throttle import ThrottledLoginView
from core.team import views as team_views

urlpatterns = [
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", core_views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links: the page's own icon, no login.
    path(
        "favicon.ico",
        login_not_required(RedirectView.as_view(url=static("core/favicon.svg"), permanent=True)),
        name="favicon",
    ),
    path("status/worker/", core_views.worker_status, name="worker-status"),
    path("settings/", core_views.settings_page, name="settings"),
    path("team/", team_views.team_page, name="team"),
    path("team/add/", team_views.add_member, name="team-add"),
    path("team/<int:pk>/password/", team_views.reset_password, name="team-password"),
    path("team/<int:pk>/active/", team_views.set_active, name="team-active"),
    path("api/", api_urls.urls),
    path("settings/tokens/", api_views.token_create, name="token-create"),
    path("settings/tokens/<int:pk>/revoke/", api_views.token_revoke, name="token-revoke"),
    path("datasets/", include("datasets.urls")),
    path("", include("training.urls")),
]
