"""The GCS and Azure emulators (session scope) for the Spark conversions that write to them."""

from tests.support.azurite import azurite_server  # noqa: F401
from tests.support.gcsserver import gcs_server  # noqa: F401
