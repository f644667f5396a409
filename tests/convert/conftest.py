"""The GCS and Azure emulators (session scope) for the Spark conversions that write to them,
and the S3 and HTTP servers for remote inputs."""

from tests.support.azurite import azurite_server  # noqa: F401
from tests.support.gcsserver import gcs_server  # noqa: F401
from tests.support.httpserver import http_server  # noqa: F401
from tests.support.s3server import s3_env, s3_server  # noqa: F401
