//! Differential tests (strata vs redis) for the geo commands: GEOADD (NX,
//! XX, CH, range errors), GEOPOS, GEODIST, GEOHASH, GEOSEARCH and
//! GEOSEARCHSTORE, GEORADIUS and GEORADIUSBYMEMBER with their _RO forms and
//! STORE/STOREDIST, in RESP2 and RESP3, byte for byte (distances with
//! %.4f, coordinates with 17 digits).

mod support;

use support::*;

fn sicily(d: &mut Diff) {
    d.exact(&["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"]);
    d.exact(&["GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"]);
}

#[test]
fn geoadd_geopos_geodist_geohash() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        sicily(&mut d);
        d.exact(&["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"]);
        d.exact(&["GEOADD", "Sicily", "CH", "13.5", "38.1", "Palermo", "1", "1", "new"]);
        d.exact(&["GEOADD", "Sicily", "NX", "14", "38", "Palermo", "2", "2", "new2"]);
        d.exact(&["GEOADD", "Sicily", "XX", "CH", "13.361389", "38.115556", "Palermo", "3", "3", "absent"]);
        d.exact(&["GEOADD", "Sicily", "XX", "NX", "1", "1", "x"]);
        d.exact(&["GEOADD", "Sicily", "1", "1"]);
        d.exact(&["GEOADD", "Sicily", "CH", "1", "1"]);
        d.exact(&["GEOADD", "Sicily", "GT", "1", "1", "x"]);
        d.exact(&["GEOADD", "Sicily", "181", "1", "x"]);
        d.exact(&["GEOADD", "Sicily", "-180.0001", "1", "x"]);
        d.exact(&["GEOADD", "Sicily", "1", "85.06", "x"]);
        d.exact(&["GEOADD", "Sicily", "1", "-85.06", "x"]);
        d.exact(&["GEOADD", "Sicily", "1", "2", "ok", "200", "100", "x"]);
        d.exact(&["GEOADD", "Sicily", "abc", "1", "x"]);
        d.exact(&["GEOADD", "Sicily", "1", "nan", "x"]);
        d.exact(&["GEOADD", "Sicily", "180", "85.05112878", "corner", "-180", "-85.05112878", "corner2"]);
        d.exact(&["GEOADD", "Sicily", "0", "0", "origin"]);
        d.exact(&["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"]);
        d.exact(&["GEOPOS", "Sicily", "Palermo", "Catania", "nosuch", "corner", "corner2", "origin", "ok"]);
        d.exact(&["GEOPOS", "nosuch", "a", "b"]);
        d.exact(&["GEOPOS", "Sicily"]);
        d.exact(&["GEOHASH", "Sicily", "Palermo", "Catania", "nosuch", "corner", "corner2", "origin"]);
        d.exact(&["GEOHASH", "nosuch", "a"]);
        for unit in ["m", "km", "mi", "ft", "M", "KM"] {
            d.exact(&["GEODIST", "Sicily", "Palermo", "Catania", unit]);
        }
        d.exact(&["GEODIST", "Sicily", "Palermo", "Catania"]);
        d.exact(&["GEODIST", "Sicily", "corner", "corner2"]);
        d.exact(&["GEODIST", "Sicily", "Palermo", "Palermo"]);
        d.exact(&["GEODIST", "Sicily", "Palermo", "nosuch"]);
        d.exact(&["GEODIST", "nosuch", "a", "b"]);
        d.exact(&["GEODIST", "Sicily", "Palermo", "Catania", "yd"]);
        d.exact(&["GEODIST", "Sicily", "Palermo", "Catania", "km", "extra"]);
        // Plain sorted-set scores decode too.
        d.exact(&["ZADD", "z", "0", "zero", "1", "one", "4503599627370495", "max", "-5", "neg"]);
        d.exact(&["GEOPOS", "z", "zero", "one", "max"]);
        d.exact(&["GEOHASH", "z", "zero", "one", "max"]);
        d.exact(&["SET", "str", "x"]);
        for cmd in [
            &["GEOADD", "str", "1", "1", "x"][..],
            &["GEOPOS", "str", "x"],
            &["GEODIST", "str", "a", "b"],
            &["GEOHASH", "str", "x"],
            &["GEORADIUS", "str", "1", "1", "1", "km"],
            &["GEOSEARCH", "str", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"],
        ] {
            d.exact(cmd);
        }
        d.finish();
    }
}

#[test]
fn georadius_and_geosearch_replies() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        sicily(&mut d);
        let queries: &[&[&str]] = &[
            &["GEORADIUS", "Sicily", "15", "37", "200", "km"],
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH"],
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "ASC"],
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "DESC", "COUNT", "1"],
            &["GEORADIUS", "Sicily", "15", "37", "300", "km", "COUNT", "2", "ANY"],
            &["GEORADIUS", "Sicily", "15", "37", "300", "km", "COUNT", "1", "ANY", "WITHDIST"],
            &["GEORADIUS", "Sicily", "15", "37", "1", "m"],
            &["GEORADIUS", "Sicily", "15", "37", "0", "m"],
            &["GEORADIUS", "Sicily", "15", "37", "5000", "mi", "withcoord"],
            &["GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "WITHDIST"],
            &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "WITHDIST"],
            &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "500000", "ft", "WITHCOORD", "DESC"],
            &["GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "100", "km"],
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"],
            &["GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km", "ASC", "WITHDIST"],
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC", "WITHCOORD"],
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "10", "10", "km"],
            &["GEOSEARCH", "Sicily", "BYRADIUS", "300", "km", "FROMLONLAT", "15", "37", "WITHHASH", "COUNT", "3"],
            &["GEOSEARCH", "nosuch", "FROMMEMBER", "x", "BYRADIUS", "1", "km"],
            &["GEORADIUS", "nosuch", "15", "37", "200", "km"],
            &["GEORADIUSBYMEMBER", "nosuch", "x", "200", "km"],
            &["GEORADIUSBYMEMBER", "nosuch", "x", "abc", "km"],
        ];
        for q in queries {
            d.exact(q);
        }
        d.finish();
    }
}

#[test]
fn geo_search_errors() {
    let mut d = Diff::new();
    sicily(&mut d);
    let errors: &[&[&str]] = &[
        &["GEORADIUS", "Sicily", "15", "37", "-1", "km"],
        &["GEORADIUS", "Sicily", "15", "37", "x", "km"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "parsec"],
        &["GEORADIUS", "Sicily", "200", "37", "1", "km"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "-3"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "x"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "ANY"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "dst", "WITHDIST"],
        &["GEORADIUS", "Sicily", "15", "37", "1", "km", "BOGUS"],
        &["GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "dst"],
        &["GEORADIUSBYMEMBER", "Sicily", "nosuch", "1", "km"],
        &["GEOSEARCH", "Sicily", "BYRADIUS", "1", "km"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "BYBOX", "1", "1", "km"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "COUNT", "1"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "km"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "1", "x", "km"],
        &["GEOSEARCH", "Sicily", "FROMMEMBER", "nosuch", "BYBOX", "1", "1", "km"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STORE", "x"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STOREDIST"],
        &["GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "WITHDIST"],
        &["GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STORE", "x"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1"],
        &["GEORADIUS", "Sicily", "15", "37", "1"],
    ];
    for e in errors {
        d.exact(e);
    }
    d.finish();
}

#[test]
fn store_forms() {
    let mut d = Diff::new();
    sicily(&mut d);
    let steps: &[&[&str]] = &[
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "r1"],
        &["ZRANGE", "r1", "0", "-1", "WITHSCORES"],
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "r2"],
        &["ZRANGE", "r2", "0", "-1", "WITHSCORES"],
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "x", "STOREDIST", "r3", "COUNT", "1", "DESC"],
        &["ZRANGE", "r3", "0", "-1", "WITHSCORES"],
        &["EXISTS", "x"],
        &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "mi", "STOREDIST", "r4"],
        &["ZRANGE", "r4", "0", "-1", "WITHSCORES"],
        &["GEOSEARCHSTORE", "s1", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "500", "500", "km"],
        &["ZRANGE", "s1", "0", "-1", "WITHSCORES"],
        &["GEOSEARCHSTORE", "s2", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"],
        &["ZRANGE", "s2", "0", "-1", "WITHSCORES"],
        &["OBJECT", "ENCODING", "s2"],
        // Nothing found, or no source: the destination is deleted.
        &["GEOSEARCHSTORE", "s2", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"],
        &["EXISTS", "s2"],
        &["GEORADIUS", "nosuch", "15", "37", "200", "km", "STORE", "r1"],
        &["EXISTS", "r1"],
        &["GEORADIUSBYMEMBER", "nosuch", "x", "200", "km", "STORE", "r4"],
        &["EXISTS", "r4"],
        &["GEOSEARCHSTORE", "s1", "nosuch", "FROMMEMBER", "x", "BYRADIUS", "1", "km"],
        &["EXISTS", "s1"],
        &["SET", "str", "v"],
        &["GEOSEARCHSTORE", "str", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"],
        &["TYPE", "str"],
        &["COMMAND", "GETKEYS", "GEORADIUS", "a", "1", "2", "3", "km", "STORE", "b", "STOREDIST", "c"],
        &["COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "a", "m", "3", "km", "STORE", "b"],
        &["COMMAND", "GETKEYS", "GEOSEARCHSTORE", "dst", "src", "FROMMEMBER", "m", "BYRADIUS", "1", "km"],
    ];
    for s in steps {
        d.exact(s);
    }
    d.finish();
}

/// Many random points, searched with radii and boxes of every scale around
/// random centres: the nine-cell scan, the filtering at the edges and the
/// formatting must agree with Redis everywhere.
#[test]
fn random_points_and_searches() {
    let mut d = Diff::new();
    let mut rng = Rng::new(2024);
    let mut add = vec!["GEOADD".to_string(), "pts".to_string()];
    for i in 0..600 {
        // Half clustered around (10, 45), half anywhere.
        let (lon, lat) = if i % 2 == 0 {
            (rng.uniform(9.0, 11.0), rng.uniform(44.0, 46.0))
        } else {
            (rng.uniform(-180.0, 180.0), rng.uniform(-85.0, 85.0))
        };
        add.push(format!("{lon:.6}"));
        add.push(format!("{lat:.6}"));
        add.push(format!("p{i}"));
    }
    d.exact(&add);
    for i in 0..60 {
        let (lon, lat) = if i % 3 == 0 {
            (format!("{:.5}", rng.uniform(9.0, 11.0)), format!("{:.5}", rng.uniform(44.0, 46.0)))
        } else {
            (format!("{:.5}", rng.uniform(-180.0, 180.0)), format!("{:.5}", rng.uniform(-85.0, 85.0)))
        };
        let radius = format!("{:.3}", [1.0, 20.0, 150.0, 900.0, 4000.0, 12000.0][i % 6] * rng.uniform(0.5, 1.5));
        d.exact(&["GEORADIUS", "pts", &lon, &lat, &radius, "km", "WITHDIST", "WITHCOORD", "WITHHASH", "ASC"]);
        d.exact(&["GEOSEARCH", "pts", "FROMLONLAT", &lon, &lat, "BYBOX", &radius, &radius, "km", "DESC", "WITHDIST"]);
        d.exact(&["GEOSEARCH", "pts", "FROMLONLAT", &lon, &lat, "BYRADIUS", &radius, "mi", "COUNT", "5"]);
        let member = format!("p{}", rng.next() % 600);
        d.exact(&["GEORADIUSBYMEMBER", "pts", &member, &radius, "km", "WITHDIST", "ASC"]);
        d.exact(&["GEODIST", "pts", &member, "p1", "km"]);
    }
    // Same longitude: the latitude-only distance path.
    d.exact(&["GEOADD", "line", "12.5", "10", "a", "12.5", "40.123456", "b", "12.5", "-30.5", "c"]);
    d.exact(&["GEODIST", "line", "a", "b"]);
    d.exact(&["GEODIST", "line", "b", "c", "mi"]);
    d.exact(&["GEOSEARCH", "line", "FROMMEMBER", "a", "BYBOX", "100", "8000", "km", "ASC", "WITHDIST"]);
    d.finish();
}

/// Infinite and huge radii, boxes and counts: Redis's answers, no hang.
#[test]
fn huge_and_infinite_sizes() {
    let mut d = Diff::new();
    sicily(&mut d);
    d.exact(&["GEOADD", "Sicily", "0", "0", "o", "179.9", "85", "n", "-179.9", "-85", "s"]);
    let steps: &[&[&str]] = &[
        &["GEORADIUS", "Sicily", "0", "0", "inf", "km"],
        &["GEORADIUS", "Sicily", "0", "0", "1e308", "km", "WITHDIST"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "0", "0", "BYBOX", "inf", "inf", "m"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "0", "0", "BYBOX", "1e300", "1", "m", "ASC"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "179", "80", "BYRADIUS", "1000", "km", "WITHDIST"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km", "COUNT", "9223372036854775807", "ANY"],
        &["GEOSEARCH", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS", "20000", "km", "COUNT", "9223372036854775807"],
        &["GEORADIUS", "Sicily", "0", "0", "-0", "km"],
        &["GEOSEARCH", "Sicily", "FROMMEMBER", "o", "BYBOX", "40000", "1", "km", "WITHCOORD"],
        &["GEODIST", "Sicily", "n", "s", "mi"],
    ];
    for s in steps {
        d.exact(s);
    }
    d.finish();
}
