"""Storage tests talk to a real moto server process, optionally through the fault proxy."""

from tests.support.faultproxy import fault_proxy  # noqa: F401
from tests.support.s3server import s3_env, s3_server  # noqa: F401
