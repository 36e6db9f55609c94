//! Reading SUMO's files: polygons (`<additional>` with `<poly>`, as written
//! by polyconvert or by hand), networks (`<net>`, for street geometry) and
//! floating-car data (`<fcd-export>`, streamed so a long run's FCD never
//! has to fit in memory). Parsers take text or a reader; opening files is
//! the caller's business, which keeps this crate free of I/O.

use std::io::BufRead;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::error::{SumoError, SumoErrorKind};
use crate::geom::Point;
use crate::shadowing::Building;

/// An edge being read: its street key and, once known, its shape.
type OpenEdge = ((String, String), Option<Vec<Point>>);

/// A SUMO polygon with its type (e.g. `building`, `natural.water`).
#[derive(Clone, Debug, PartialEq)]
pub struct Poly {
    pub id: String,
    pub kind: String,
    pub shape: Vec<Point>,
}

impl Poly {
    pub fn to_building(&self) -> Building {
        Building::new(self.id.clone(), self.shape.clone())
    }
}

/// A street: the geometry shared by an edge and its reverse.
#[derive(Clone, Debug, PartialEq)]
pub struct Street {
    /// The junction pair, smaller id first, so both directions share it.
    pub key: (String, String),
    pub shape: Vec<Point>,
}

/// The parts of a SUMO network the models use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Network {
    pub streets: Vec<Street>,
}

impl Network {
    pub fn total_length_m(&self) -> f64 {
        self.streets
            .iter()
            .map(|s| crate::geom::length(&s.shape))
            .sum()
    }
}

struct Ctx<'a> {
    source: &'a str,
    text: Option<&'a str>,
}

impl Ctx<'_> {
    fn err(&self, pos: u64, kind: SumoErrorKind) -> SumoError {
        let location = match self.text {
            Some(t) => {
                let upto = (pos as usize).min(t.len());
                format!(
                    "line {}",
                    t.as_bytes()[..upto].iter().filter(|&&b| b == b'\n').count() + 1
                )
            }
            None => format!("byte {pos}"),
        };
        SumoError {
            source_name: self.source.to_string(),
            location,
            kind,
        }
    }
}

fn attr(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, SumoErrorKind> {
    for a in e.attributes() {
        let a = a.map_err(|err| SumoErrorKind::Xml(err.to_string()))?;
        if a.key.as_ref() == name.as_bytes() {
            let v = a
                .unescape_value()
                .map_err(|err| SumoErrorKind::Xml(err.to_string()))?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

fn required(
    e: &BytesStart<'_>,
    element: &'static str,
    name: &'static str,
) -> Result<String, SumoErrorKind> {
    attr(e, name)?.ok_or(SumoErrorKind::MissingAttribute {
        element,
        attribute: name,
    })
}

fn number(element: &'static str, attribute: &'static str, v: &str) -> Result<f64, SumoErrorKind> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(SumoErrorKind::BadAttribute {
            element,
            attribute,
            expected: "a finite number",
            found: v.to_string(),
        }),
    }
}

/// SUMO's shape syntax: `x,y x,y ...` (a third z coordinate is ignored).
pub fn parse_shape(element: &'static str, v: &str) -> Result<Vec<Point>, SumoErrorKind> {
    let bad = || SumoErrorKind::BadAttribute {
        element,
        attribute: "shape",
        expected: "space-separated x,y pairs",
        found: v.chars().take(60).collect(),
    };
    let mut pts = Vec::new();
    for pair in v.split_whitespace() {
        let mut it = pair.split(',');
        let x = it
            .next()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(bad)?;
        let y = it
            .next()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(bad)?;
        if !x.is_finite() || !y.is_finite() {
            return Err(bad());
        }
        pts.push(Point::new(x, y));
    }
    if pts.len() < 2 {
        return Err(bad());
    }
    Ok(pts)
}

fn root_check(
    ctx: &Ctx<'_>,
    pos: u64,
    found: &[u8],
    root: &'static str,
    expected: &'static str,
) -> Result<(), SumoError> {
    if found != root.as_bytes() {
        return Err(ctx.err(
            pos,
            SumoErrorKind::WrongRoot {
                expected,
                root,
                found: String::from_utf8_lossy(found).into_owned(),
            },
        ));
    }
    Ok(())
}

/// Every `<poly>` of a SUMO additional/polygon file.
pub fn parse_polys(text: &str, source: &str) -> Result<Vec<Poly>, SumoError> {
    let ctx = Ctx {
        source,
        text: Some(text),
    };
    let mut reader = Reader::from_str(text);
    let mut polys = Vec::new();
    let mut saw_root = false;
    loop {
        let pos = reader.buffer_position();
        match reader.read_event() {
            Err(e) => return Err(ctx.err(pos, SumoErrorKind::Xml(e.to_string()))),
            Ok(Event::Eof) => break,
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                if !saw_root {
                    // polyconvert writes <additional>, older tools <shapes>.
                    let name = e.name();
                    if name.as_ref() != b"shapes" {
                        root_check(&ctx, pos, name.as_ref(), "additional", "polygon")?;
                    }
                    saw_root = true;
                    continue;
                }
                if e.name().as_ref() == b"poly" {
                    let build = || -> Result<Poly, SumoErrorKind> {
                        Ok(Poly {
                            id: required(&e, "poly", "id")?,
                            kind: attr(&e, "type")?.unwrap_or_default(),
                            shape: parse_shape("poly", &required(&e, "poly", "shape")?)?,
                        })
                    };
                    polys.push(build().map_err(|k| ctx.err(pos, k))?);
                }
            }
            Ok(_) => {}
        }
    }
    if !saw_root {
        return Err(ctx.err(0, SumoErrorKind::Empty("an <additional> root element")));
    }
    Ok(polys)
}

/// The streets of a SUMO network: every normal edge (internal junction
/// edges, crossings and walking areas are not streets), one entry per pair
/// of junctions so a two-way street counts once.
pub fn parse_network(text: &str, source: &str) -> Result<Network, SumoError> {
    let ctx = Ctx {
        source,
        text: Some(text),
    };
    let mut reader = Reader::from_str(text);
    let mut saw_root = false;
    let mut net = Network::default();
    let mut seen = std::collections::HashSet::new();
    // An edge without its own shape takes its first lane's.
    let mut open_edge: Option<OpenEdge> = None;
    loop {
        let pos = reader.buffer_position();
        let ev = reader
            .read_event()
            .map_err(|e| ctx.err(pos, SumoErrorKind::Xml(e.to_string())))?;
        match ev {
            Event::Eof => break,
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_empty = matches!(ev, Event::Empty(_));
                if !saw_root {
                    root_check(&ctx, pos, e.name().as_ref(), "net", "network")?;
                    saw_root = true;
                    continue;
                }
                match e.name().as_ref() {
                    b"edge" => {
                        let parse = || -> Result<Option<OpenEdge>, SumoErrorKind> {
                            if attr(e, "function")?.is_some_and(|f| f != "normal") {
                                return Ok(None);
                            }
                            let from = required(e, "edge", "from")?;
                            let to = required(e, "edge", "to")?;
                            let key = if from <= to { (from, to) } else { (to, from) };
                            let shape = attr(e, "shape")?
                                .map(|s| parse_shape("edge", &s))
                                .transpose()?;
                            Ok(Some((key, shape)))
                        };
                        let edge = parse().map_err(|k| ctx.err(pos, k))?;
                        if let Some((key, shape)) = edge {
                            if is_empty {
                                if let Some(shape) = shape {
                                    if seen.insert(key.clone()) {
                                        net.streets.push(Street { key, shape });
                                    }
                                }
                            } else {
                                open_edge = Some((key, shape));
                            }
                        }
                    }
                    b"lane" => {
                        if let Some((_, shape @ None)) = open_edge.as_mut() {
                            let s = required(e, "lane", "shape")
                                .and_then(|s| parse_shape("lane", &s))
                                .map_err(|k| ctx.err(pos, k))?;
                            *shape = Some(s);
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) if e.name().as_ref() == b"edge" => {
                if let Some((key, Some(shape))) = open_edge.take() {
                    if seen.insert(key.clone()) {
                        net.streets.push(Street { key, shape });
                    }
                }
            }
            _ => {}
        }
    }
    if !saw_root {
        return Err(ctx.err(0, SumoErrorKind::Empty("a <net> root element")));
    }
    Ok(net)
}

/// One vehicle at one FCD time step.
#[derive(Clone, Debug, PartialEq)]
pub struct FcdVehicle {
    pub id: String,
    pub pos: Point,
    /// m/s (0 when the file does not say).
    pub speed: f64,
}

/// All vehicles on the map at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct FcdStep {
    pub time_s: f64,
    pub vehicles: Vec<FcdVehicle>,
}

/// Streams `<timestep>`s out of SUMO's `--fcd-output`.
pub struct FcdReader<R: BufRead> {
    reader: Reader<R>,
    buf: Vec<u8>,
    source: String,
    saw_root: bool,
    done: bool,
    last_time: Option<f64>,
}

impl<R: BufRead> FcdReader<R> {
    pub fn new(input: R, source: impl Into<String>) -> FcdReader<R> {
        FcdReader {
            reader: Reader::from_reader(input),
            buf: Vec::new(),
            source: source.into(),
            saw_root: false,
            done: false,
            last_time: None,
        }
    }

    fn err(&self, pos: u64, kind: SumoErrorKind) -> SumoError {
        Ctx {
            source: &self.source,
            text: None,
        }
        .err(pos, kind)
    }

    /// The next time step, `Ok(None)` at the end of the file.
    pub fn next_step(&mut self) -> Result<Option<FcdStep>, SumoError> {
        if self.done {
            return Ok(None);
        }
        let mut step: Option<FcdStep> = None;
        loop {
            self.buf.clear();
            let pos = self.reader.buffer_position();
            let ev = match self.reader.read_event_into(&mut self.buf) {
                Ok(ev) => ev.into_owned(),
                Err(e) => return Err(self.err(pos, SumoErrorKind::Xml(e.to_string()))),
            };
            match ev {
                Event::Eof => {
                    self.done = true;
                    if !self.saw_root {
                        return Err(
                            self.err(pos, SumoErrorKind::Empty("an <fcd-export> root element"))
                        );
                    }
                    return Err(self.err(pos, SumoErrorKind::Truncated("fcd-export")));
                }
                Event::Start(ref e) | Event::Empty(ref e) => {
                    let empty = matches!(ev, Event::Empty(_));
                    if !self.saw_root {
                        let ctx = Ctx {
                            source: &self.source,
                            text: None,
                        };
                        root_check(&ctx, pos, e.name().as_ref(), "fcd-export", "FCD")?;
                        self.saw_root = true;
                        if empty {
                            self.done = true;
                            return Ok(None);
                        }
                        continue;
                    }
                    match e.name().as_ref() {
                        b"timestep" => {
                            let t = required(e, "timestep", "time")
                                .and_then(|v| number("timestep", "time", &v))
                                .map_err(|k| self.err(pos, k))?;
                            if let Some(prev) = self.last_time {
                                if t < prev {
                                    return Err(self.err(
                                        pos,
                                        SumoErrorKind::TimeBackwards {
                                            previous: prev,
                                            found: t,
                                        },
                                    ));
                                }
                            }
                            self.last_time = Some(t);
                            let s = FcdStep {
                                time_s: t,
                                vehicles: Vec::new(),
                            };
                            if empty {
                                return Ok(Some(s));
                            }
                            step = Some(s);
                        }
                        b"vehicle" => {
                            let parse = || -> Result<FcdVehicle, SumoErrorKind> {
                                let x = number("vehicle", "x", &required(e, "vehicle", "x")?)?;
                                let y = number("vehicle", "y", &required(e, "vehicle", "y")?)?;
                                let speed = match attr(e, "speed")? {
                                    Some(v) => number("vehicle", "speed", &v)?,
                                    None => 0.0,
                                };
                                Ok(FcdVehicle {
                                    id: required(e, "vehicle", "id")?,
                                    pos: Point::new(x, y),
                                    speed,
                                })
                            };
                            let v = parse().map_err(|k| self.err(pos, k))?;
                            // Vehicles outside a <timestep> have no time: ignore them
                            // rather than guess one.
                            if let Some(s) = step.as_mut() {
                                s.vehicles.push(v);
                            }
                        }
                        _ => {}
                    }
                }
                Event::End(ref e) => match e.name().as_ref() {
                    b"timestep" => {
                        if let Some(s) = step.take() {
                            return Ok(Some(s));
                        }
                    }
                    b"fcd-export" => {
                        self.done = true;
                        return Ok(None);
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polys_and_errors() {
        let text = "<additional>\n<poly id=\"b1\" type=\"building\" shape=\"0,0 10,0 10,10 0,10 0,0\"/>\n</additional>";
        let p = parse_polys(text, "t.poly.xml").unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].shape.len(), 5);
        let bad = "<additional>\n<poly id=\"b1\" shape=\"0,0 x,0\"/>\n</additional>";
        let e = parse_polys(bad, "t.poly.xml").unwrap_err().to_string();
        assert!(
            e.starts_with("t.poly.xml:line 2: <poly> attribute \"shape\""),
            "{e}"
        );
        let e = parse_polys("<net/>", "n").unwrap_err().to_string();
        assert!(e.contains("expected a SUMO polygon file"), "{e}");
    }

    #[test]
    fn network_streets_dedup_both_directions() {
        let text = r#"<net>
  <edge id=":J0_0" function="internal"><lane id=":J0_0_0" shape="0,0 1,1"/></edge>
  <edge id="a" from="J0" to="J1"><lane id="a_0" shape="0,-1.6 100,-1.6"/></edge>
  <edge id="b" from="J1" to="J0" shape="100,0 0,0"><lane id="b_0" shape="100,1.6 0,1.6"/></edge>
</net>"#;
        let n = parse_network(text, "n").unwrap();
        assert_eq!(n.streets.len(), 1);
        assert!((n.total_length_m() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn fcd_streams_steps() {
        let text = r#"<?xml version="1.0"?>
<fcd-export>
  <timestep time="0.00"/>
  <timestep time="1.00"><vehicle id="v0" x="1" y="2" speed="3"/></timestep>
</fcd-export>"#;
        let mut r = FcdReader::new(text.as_bytes(), "f");
        assert_eq!(r.next_step().unwrap().unwrap().vehicles.len(), 0);
        let s = r.next_step().unwrap().unwrap();
        assert_eq!((s.time_s, s.vehicles[0].pos), (1.0, Point::new(1.0, 2.0)));
        assert!(r.next_step().unwrap().is_none());
        let mut bad = FcdReader::new("<fcd-export><timestep time=\"x\"/>".as_bytes(), "f");
        assert!(bad
            .next_step()
            .unwrap_err()
            .to_string()
            .contains("expected a finite number"));
        let mut cut = FcdReader::new("<fcd-export><timestep time=\"1\">".as_bytes(), "f");
        assert!(cut.next_step().is_err());
    }
}
