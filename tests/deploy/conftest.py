"""Fixtures of the deployment tests: real PostgreSQL and S3 servers on 127.0.0.1, started once per
session and stopped by PID (tests/fixtures/local_servers.py); the test skips, with the reason, only
where the server's software is missing and cannot be installed."""

import pytest
from local_servers import S3, Postgres, Unavailable, postgres_server, s3_server


@pytest.fixture(scope="session")
def postgres() -> Postgres:
    try:
        with postgres_server() as server:
            yield server
    except Unavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def s3() -> S3:
    try:
        with s3_server() as server:
            yield server
    except Unavailable as error:
        pytest.skip(str(error))
