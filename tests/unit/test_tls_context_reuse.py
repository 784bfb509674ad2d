"""cdc.replica.sql.connect makes PyMySQL's default (PREFERRED) TLS context once per process and
hands the same one to every connection -- unchanged: TLS offered, not required, unverified --
while explicit ssl options still get a context of their own per connection."""

from __future__ import annotations

import ssl

from cdc.replica.config import ReplicaConfig, SslOptions
from cdc.replica.sql import connect


def _unconnected(config):
    return connect(config, defer_connect=True)          # no server needed: nothing is sent


def test_preferred_mode_shares_one_unverified_context():
    a, b = _unconnected(ReplicaConfig("127.0.0.1", 1, "u", "p")), \
        _unconnected(ReplicaConfig("127.0.0.1", 2, "u", "p"))
    assert a.ctx is b.ctx
    assert (a.ctx.verify_mode, a.ctx.check_hostname) == (ssl.CERT_NONE, False)
    assert a.ssl is True and a._ssl_required is False           # still PREFERRED, not REQUIRED


def test_explicit_ssl_options_are_not_shared():
    cfg = ReplicaConfig("127.0.0.1", 1, "u", "p", ssl=SslOptions())
    a, b = _unconnected(cfg), _unconnected(cfg)
    assert a.ctx is not b.ctx and a._ssl_required is True
    assert a.ctx is not _unconnected(ReplicaConfig("127.0.0.1", 1, "u", "p")).ctx


def test_disabled_tls_has_no_context():
    c = _unconnected(ReplicaConfig("127.0.0.1", 1, "u", "p", ssl=False))
    assert c.ssl is False


def test_unverified_contexts_load_no_ca_store_and_keep_the_default_protocols():
    """PREFERRED and REQUIRED verify nothing: their context skips the system CA store (the
    cost of making one) and is otherwise a default client context (same minimum version)."""
    default = ssl.create_default_context()
    for ctx in (_unconnected(ReplicaConfig("127.0.0.1", 1, "u", "p")).ctx,
                SslOptions.from_mode("required").context()):
        assert ctx.cert_store_stats()["x509_ca"] == 0
        assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_NONE, False)
        assert ctx.minimum_version == default.minimum_version
        assert ctx.protocol == default.protocol
