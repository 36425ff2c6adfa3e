"""Check-in loader (Gowalla raw, Foursquare raw, CSV with a header) on fixture files written here."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.data.checkins import Checkins, checkin_cells, read_checkins
from metricdp.errors import ValidationError

GOWALLA = (
    "0\t2010-10-19T23:55:27Z\t30.2359091167\t-97.7951395833\t22847\n"
    "0\t2010-10-18T22:17:43Z\t30.2691029532\t-97.7493953705\t420315\n"
    "1\t2010-10-17T23:42:03Z\t30.2557309927\t-97.7633857727\t316637\n"
)
FOURSQUARE = (
    "470\t49bbd6c0f964a520f4531fe3\t4bf58dd8d48988d127951735\tArts & Crafts Store\t40.719810375488535\t"
    "-74.00258103213994\t-240\tTue Apr 03 18:00:09 +0000 2012\n"
    "979\t4a43c0aef964a520c6a61fe3\t4bf58dd8d48988d1df941735\tBridge\t40.60679958140643\t"
    "-74.04416981025437\t-240\tTue Apr 03 18:00:25 +0200 2012\n"
)


def _write(tmp_path, text, name="c.txt", encoding="utf-8"):
    p = tmp_path / name
    p.write_text(text, encoding=encoding)
    return p


def test_gowalla_raw(tmp_path):
    c = read_checkins(_write(tmp_path, GOWALLA))
    assert isinstance(c, Checkins) and len(c) == 3 and c.users == 2
    assert c.user.tolist() == ["0", "0", "1"]
    assert c.time.dtype == np.dtype("datetime64[s]")
    assert c.time[0] == np.datetime64("2010-10-19T23:55:27")
    np.testing.assert_array_equal(c.lat, [30.2359091167, 30.2691029532, 30.2557309927])
    np.testing.assert_array_equal(c.lon, [-97.7951395833, -97.7493953705, -97.7633857727])
    assert len(read_checkins(_write(tmp_path, GOWALLA), limit=2)) == 2


def test_foursquare_raw_times_become_utc(tmp_path):
    c = read_checkins(_write(tmp_path, FOURSQUARE))
    assert c.user.tolist() == ["470", "979"]
    assert c.time.tolist()[0].isoformat() == "2012-04-03T18:00:09"
    assert c.time[1] == np.datetime64("2012-04-03T16:00:25")  # +0200 -> UTC
    assert c.lat[0] == 40.719810375488535 and c.lon[1] == -74.04416981025437


def test_csv_with_header_any_order_aliases_and_bom(tmp_path):
    text = (
        "latitude,venue,userId,longitude,utcTimestamp\n"
        "48.85,v1,alice,2.35,2012-04-03 18:00:09\n"
        "\n"
        "48.86,v2,bob,2.36,1333476000\n"  # Unix seconds
        "48.87,v3,carol,2.37,2012-04-03T20:00:00+01:00\n"
    )
    c = read_checkins(_write(tmp_path, text, "c.csv", encoding="utf-8-sig"))
    assert c.user.tolist() == ["alice", "bob", "carol"]
    assert c.time.tolist()[1].isoformat() == "2012-04-03T18:00:00"
    assert c.time[2] == np.datetime64("2012-04-03T19:00:00")
    np.testing.assert_array_equal(c.lat, [48.85, 48.86, 48.87])
    plain = read_checkins(_write(tmp_path, "user,time,lat,lon\nu,2010-01-01T00:00:00Z,1.5,2.5\n", "p.csv"))
    assert plain.user.tolist() == ["u"] and plain.lon.tolist() == [2.5]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("user,time,lat,lon\nu,2010-01-01,1.0,2.0\nu,2010-01-01,north,2.0\n", "line 3: latitude/longitude"),
        ("user,time,lat,lon\nu,2010-01-01,1,2\n\nu,2010-01-01,95,2\n", r"line 4: \(95.0, 2.0\) is not"),
        ("user,time,lat,lon\nu,2010-01-01,1.0\n", "line 2 has 3 field"),
        ("user,time,lat,lon\nu,2010-01-01,1.0,2.0\nu,yesterday,1.0,2.0\n", "line 3: time 'yesterday'"),
        ("a,b,c\n1,2,3\n", "line 1: cannot tell the columns"),
        ("user,lat,lon\nu,1,2\n", "line 1: the header has no time column"),
        ("\n\n", "empty file"),
        ("user,time,lat,lon\n", "no check-ins"),
    ],
)
def test_errors_name_the_line(tmp_path, text, message):
    p = _write(tmp_path, text, "bad.csv")
    with pytest.raises(ValidationError, match=message) as info:
        read_checkins(p)
    assert "bad.csv" in str(info.value)


def test_missing_file_and_bad_limit(tmp_path):
    with pytest.raises(ValidationError, match="no such file"):
        read_checkins(tmp_path / "nope.txt")
    with pytest.raises(ValidationError, match="limit must be >= 1"):
        read_checkins(_write(tmp_path, GOWALLA), limit=0)


def test_checkin_cells_weights_are_counts(tmp_path):
    rows = ["user,time,lat,lon"]
    # 3 check-ins in one 0.01-degree cell, 2 in another, 1 in a third, 1 outside the box
    for k, (la, lo) in enumerate([(0.005, 0.005)] * 3 + [(0.015, 0.005)] * 2 + [(0.005, 0.025), (5.0, 5.0)]):
        rows.append(f"u{k},2010-01-01T00:00:0{k},{la},{lo}")
    c = read_checkins(_write(tmp_path, "\n".join(rows) + "\n", "c.csv"))
    cells = checkin_cells(c, (0, 0, 0.1, 0.1), cell=0.01, size=3)
    assert cells.space.labels == ("cell_0_0", "cell_1_0", "cell_0_2")
    assert cells.weights.tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(ValidationError, match="must be a Checkins"):
        checkin_cells([1, 2], "paris")
