"""Damaged real binlogs and the server's binlog end, against the private MariaDB."""

import random

import pymysql
import pytest

from cdc.cli.lag import ServerStatus
from cdc.errors import ParseError, TruncatedEventError
from cdc.binlog.files import read_events
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import assemble


@pytest.mark.server


@pytest.mark.server
