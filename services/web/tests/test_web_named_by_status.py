"""`seedline status` tells that this system offers the web process by its durable consumer,
which outlives it: the consumer's name must keep the prefix status looks for."""

from seedline_cli.status_checks import WEB_CONSUMER_PREFIX
from seedline_web.opens import PROJECTION


def test_the_webs_durable_consumer_has_the_name_status_looks_for():
    assert PROJECTION.startswith(WEB_CONSUMER_PREFIX)
