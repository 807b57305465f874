"""The desktop tests need what the lab tests need (root, /dev/net/tun, the lab binaries)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from thinwan.substrates.binaries import MissingBinary, find_binary


@pytest.fixture(scope="session")
def lab_env() -> None:
    """Skip unless the lab can run here."""
    if os.geteuid() != 0:
        pytest.skip("desktop tests need root (network namespaces, X servers, tcpdump)")
    if not Path("/dev/net/tun").exists():
        pytest.skip("no /dev/net/tun")
    try:
        find_binary("thinwan-link")
    except MissingBinary as e:
        pytest.fail(f"the lab binaries are missing: {e} (run scripts/setup.sh)")
