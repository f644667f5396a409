"""The object-store servers of the backend suite (S3 on moto, GCS emulator, Azurite, HTTP), for
the Parquet stream's backend tests."""

from tests.backends.conftest import store, store_env  # noqa: F401
from tests.support.azurite import azurite_server  # noqa: F401
from tests.support.gcsserver import gcs_server  # noqa: F401
from tests.support.httpserver import http_server  # noqa: F401
from tests.support.s3server import s3_server  # noqa: F401
