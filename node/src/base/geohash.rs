//! Redis's geohash arithmetic (geohash.c, geohash_helper.c): 52-bit
//! interleaved scores, cell areas, neighbours, the nine cells a search
//! scans and the haversine distance, with Redis's constants and operation
//! order so results agree to the last bit.

pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

const DEG_TO_RAD: f64 = 0.017453292519943295769236907684886;
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score range `[min, max)` of this cell at full precision.
    pub fn score_range(self) -> (u64, u64) {
        let shift = 52 - self.step as u32 * 2;
        (self.bits << shift, (self.bits + 1) << shift)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Range {
    min: f64,
    max: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Area {
    lon: Range,
    lat: Range,
}

const LONG_RANGE: Range = Range { min: LONG_MIN, max: LONG_MAX };
const LAT_RANGE: Range = Range { min: LAT_MIN, max: LAT_MAX };

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] =
        [0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (xlo as u64, ylo as u64);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// Redis's `geohashEncode` over the given ranges; None outside them.
fn encode_in(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min);
    lat_offset *= (1u64 << step) as f64;
    lon_offset *= (1u64 << step) as f64;
    Some(HashBits { bits: interleave64(lat_offset as u32, lon_offset as u32), step })
}

/// The 52-bit score of a valid coordinate pair.
pub fn encode(lon: f64, lat: f64) -> Option<HashBits> {
    encode_in(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX)
}

fn decode_in(lon_range: Range, lat_range: Range, hash: HashBits) -> Area {
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let ilat = sep as u32;
    let ilon = (sep >> 32) as u32;
    let cells = (1u64 << hash.step) as f64;
    Area {
        lat: Range {
            min: lat_range.min + (ilat as f64 * 1.0 / cells) * lat_scale,
            max: lat_range.min + ((ilat.wrapping_add(1)) as f64 * 1.0 / cells) * lat_scale,
        },
        lon: Range {
            min: lon_range.min + (ilon as f64 * 1.0 / cells) * lon_scale,
            max: lon_range.min + ((ilon.wrapping_add(1)) as f64 * 1.0 / cells) * lon_scale,
        },
    }
}

/// The centre (longitude, latitude) of the cell a score names, clamped to
/// the valid ranges (Redis's `decodeGeohash`).
pub fn decode_score(score: f64) -> (f64, f64) {
    let area = decode_in(LONG_RANGE, LAT_RANGE, HashBits { bits: score_bits(score), step: STEP_MAX });
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// C's `(uint64_t)score` for the scores a geo set can hold.
fn score_bits(score: f64) -> u64 {
    if score < 0.0 { score as i64 as u64 } else { score as u64 }
}

/// The standard 11-character base-32 geohash of a score (GEOHASH): decoded,
/// then re-encoded over latitude ±90.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    let bits = encode_in(LONG_RANGE, Range { min: -90.0, max: 90.0 }, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

fn moved(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    let mut h = hash;
    move_x(&mut h, dx);
    move_y(&mut h, dy);
    h
}

/// A search shape around a centre; sizes in the request's unit.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    /// Metres per unit.
    pub conversion: f64,
}

fn deg_rad(a: f64) -> f64 {
    a * DEG_TO_RAD
}

fn rad_deg(a: f64) -> f64 {
    a / DEG_TO_RAD
}

fn estimate_steps(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// [min lon, min lat, max lon, max lat] around the centre.
fn bounding_box(s: &Search) -> [f64; 4] {
    let (half_h, half_w) = match s.shape {
        Shape::Radius(r) => (r, r),
        Shape::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = s.conversion * half_h;
    let width = s.conversion * half_w;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let lon_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(s.lat + lat_delta).cos());
    let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(s.lat - lat_delta).cos());
    let south = s.lat < 0.0;
    let lon_delta = if south { lon_delta_bottom } else { lon_delta_top };
    [s.lon - lon_delta, s.lat - lat_delta, s.lon + lon_delta, s.lat + lat_delta]
}

/// The cells to scan for a search, in Redis's order (centre, N, S, E, W,
/// NE, NW, SE, SW), with useless ones zeroed and repeats of the previously
/// scanned cell dropped, as `membersOfAllNeighbors` skips them.
pub fn search_cells(s: &Search) -> Vec<HashBits> {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let radius_meters = match s.shape {
        Shape::Radius(r) => r,
        Shape::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
    } * s.conversion;
    let mut steps = estimate_steps(radius_meters, s.lat);
    let encode_at = |steps| encode_in(LONG_RANGE, LAT_RANGE, s.lon, s.lat, steps).unwrap_or_default();
    let mut hash = encode_at(steps);
    let cells = |h: HashBits| {
        [
            h,
            moved(h, 0, 1),
            moved(h, 0, -1),
            moved(h, 1, 0),
            moved(h, -1, 0),
            moved(h, 1, 1),
            moved(h, -1, 1),
            moved(h, 1, -1),
            moved(h, -1, -1),
        ]
    };
    let mut n = cells(hash);
    let decode = |h| decode_in(LONG_RANGE, LAT_RANGE, h);
    let decrease = decode(n[1]).lat.max < max_lat
        || decode(n[2]).lat.min > min_lat
        || decode(n[3]).lon.max < max_lon
        || decode(n[4]).lon.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        hash = encode_at(steps);
        n = cells(hash);
    }
    let area = decode(hash);
    if steps >= 2 {
        let zero = |n: &mut [HashBits; 9], idx: [usize; 3]| idx.iter().for_each(|&i| n[i] = HashBits::default());
        if area.lat.min < min_lat {
            zero(&mut n, [2, 8, 7]);
        }
        if area.lat.max > max_lat {
            zero(&mut n, [1, 5, 6]);
        }
        if area.lon.min < min_lon {
            zero(&mut n, [4, 8, 6]);
        }
        if area.lon.max > max_lon {
            zero(&mut n, [3, 7, 5]);
        }
    }
    let mut out = Vec::with_capacity(9);
    let mut last: Option<usize> = None;
    for (i, &h) in n.iter().enumerate() {
        if h.is_zero() {
            continue;
        }
        // Redis compares with the last scanned cell only once one other
        // than the centre was scanned.
        if let Some(l) = last
            && l != 0
            && n[l] == h
        {
            continue;
        }
        out.push(h);
        last = Some(i);
    }
    out
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The distance from the centre in metres when (lon, lat) is inside the
/// shape.
pub fn within(s: &Search, lon: f64, lat: f64) -> Option<f64> {
    match s.shape {
        Shape::Radius(r) => {
            let d = distance(s.lon, s.lat, lon, lat);
            (d <= r * s.conversion).then_some(d)
        }
        Shape::Box { width, height } => {
            let (w, h) = (width * s.conversion, height * s.conversion);
            if lat_distance(lat, s.lat) > h / 2.0 {
                return None;
            }
            if distance(lon, lat, s.lon, lat) > w / 2.0 {
                return None;
            }
            Some(distance(s.lon, s.lat, lon, lat))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_is_close() {
        let h = encode(13.361389, 38.115556).unwrap();
        assert_eq!(h.bits, 3479099956230698);
        let (lon, lat) = decode_score(h.bits as f64);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        assert_eq!(&geohash_string(h.bits as f64), b"sqc8b49rny0");
    }

    #[test]
    fn interleave_round_trips() {
        let v = interleave64(0x1234567, 0x2abcdef);
        assert_eq!(deinterleave64(v), 0x1234567 | (0x2abcdef << 32));
    }
}
