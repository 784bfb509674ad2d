"""cdc.snapshot.reader.owned_gtids: the GTIDs of ``@@GLOBAL.gtid_owned`` as MySQL 9.7 prints them
(the texts below are the server's, three sessions with ``SET GTID_NEXT``)."""

from cdc.snapshot.reader import owned_gtids

U1 = "1b0bc48b-ea29-11f1-a9ba-02fc00000001"
U2 = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def test_one_source_two_owners():
    assert owned_gtids("d4874f67-ea23-11f1-b96c-02fc00000001:101#13:100#12") == {
        ("d4874f67-ea23-11f1-b96c-02fc00000001", "", "101"),
        ("d4874f67-ea23-11f1-b96c-02fc00000001", "", "100")}


def test_sources_and_tags_without_separators():
    # thread 13 owns U1:9, thread 12 U1:tg:7, thread 14 U2:tg:3: no separator between them
    text = f"{U1}:9#13{U1}:tg:7#12{U2}:tg:3#14"
    assert owned_gtids(text) == {(U1, "", "9"), (U1, "tg", "7"), (U2, "tg", "3")}
    # an owner keeps its identity whoever else owns a GTID
    assert (U1, "", "9") in owned_gtids(f"{U1}:9#13") & owned_gtids(text)


def test_comma_separated_and_empty():
    assert owned_gtids(f"{U1}:5#3,\n{U2}:6#4") == {(U1, "", "5"), (U2, "", "6")}
    assert owned_gtids("") == set()
