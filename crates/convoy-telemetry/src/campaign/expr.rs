//! Trigger expressions: a small hand-written recursive-descent parser
//! (the grammar is a dozen lines, so a parser crate would cost more than
//! it saves) and the evaluator the agent's trigger engine runs.
//!
//! ```text
//! expr    := and ("||" and)*
//! and     := unary ("&&" unary)*
//! unary   := "!" unary | primary
//! primary := "(" expr ")" | ("rising" | "falling") "(" expr ")"
//!          | operand (cmp operand)?
//! cmp     := ">" | ">=" | "<" | "<=" | "==" | "!="
//! operand := SIGNAL | NUMBER | "true" | "false"
//! ```
//!
//! A signal alone is true when it is `true` or a non-zero number. A
//! comparison with a signal that has no value yet is false.

use std::collections::HashMap;

use crate::Value;

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Signal(String),
    Number(f64),
    Bool(bool),
}

/// A parsed expression. Edge nodes carry their own index into the state
/// the evaluator keeps ([`Expr::edges`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Rising(usize, Box<Expr>),
    Falling(usize, Box<Expr>),
    Compare(Operand, Cmp, Operand),
    Truth(Operand),
}

/// A syntax error: what, at which 1-based column.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Op(&'static str),
    LParen,
    RParen,
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let err = |i: usize, m: String| ParseError {
        column: i + 1,
        message: m,
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push((start, Tok::Ident(src[start..i].to_string())));
        } else if c.is_ascii_digit() || c == b'-' || c == b'.' {
            i += 1;
            while i < b.len()
                && (b[i].is_ascii_digit()
                    || matches!(b[i], b'.' | b'e' | b'E')
                    || (matches!(b[i], b'-' | b'+') && matches!(b[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let t = &src[start..i];
            let n: f64 = t
                .parse()
                .map_err(|_| err(start, format!("not a number: {t:?}")))?;
            out.push((start, Tok::Num(n)));
        } else {
            let two = src.get(i..i + 2).unwrap_or("");
            let op = ["&&", "||", ">=", "<=", "==", "!="]
                .into_iter()
                .find(|o| *o == two);
            if let Some(o) = op {
                out.push((start, Tok::Op(o)));
                i += 2;
                continue;
            }
            let t = match c {
                b'(' => Tok::LParen,
                b')' => Tok::RParen,
                b'>' => Tok::Op(">"),
                b'<' => Tok::Op("<"),
                b'!' => Tok::Op("!"),
                b'&' | b'|' => {
                    return Err(err(i, format!("'{}' alone: write '{0}{0}'", c as char)))
                }
                _ => {
                    let ch = src[i..].chars().next().unwrap_or('?');
                    return Err(err(i, format!("unexpected character {ch:?}")));
                }
            };
            out.push((start, t));
            i += 1;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    end: usize,
    edges: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }

    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(c, _)| *c) + 1
    }

    fn fail<T>(&self, message: String) -> Result<T, ParseError> {
        Err(ParseError {
            column: self.col(),
            message,
        })
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.and()?;
        while self.eat(&Tok::Op("||")) {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.unary()?;
        while self.eat(&Tok::Op("&&")) {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.eat(&Tok::Op("!")) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        if self.eat(&Tok::LParen) {
            let e = self.or()?;
            if !self.eat(&Tok::RParen) {
                return self.fail("expected ')'".into());
            }
            return Ok(e);
        }
        if let Some(Tok::Ident(f)) = self.peek() {
            if (f == "rising" || f == "falling")
                && self.toks.get(self.pos + 1).map(|(_, t)| t) == Some(&Tok::LParen)
            {
                let rising = f == "rising";
                self.pos += 2;
                let inner = self.or()?;
                if !self.eat(&Tok::RParen) {
                    return self.fail("expected ')' to close the edge".into());
                }
                let slot = self.edges;
                self.edges += 1;
                return Ok(if rising {
                    Expr::Rising(slot, Box::new(inner))
                } else {
                    Expr::Falling(slot, Box::new(inner))
                });
            }
        }
        let left = self.operand()?;
        let cmp = match self.peek() {
            Some(Tok::Op(">")) => Cmp::Gt,
            Some(Tok::Op(">=")) => Cmp::Ge,
            Some(Tok::Op("<")) => Cmp::Lt,
            Some(Tok::Op("<=")) => Cmp::Le,
            Some(Tok::Op("==")) => Cmp::Eq,
            Some(Tok::Op("!=")) => Cmp::Ne,
            _ => {
                return match left {
                    Operand::Number(_) => {
                        self.fail("a number alone is not a condition: compare it".into())
                    }
                    o => Ok(Expr::Truth(o)),
                }
            }
        };
        self.pos += 1;
        let right = self.operand()?;
        Ok(Expr::Compare(left, cmp, right))
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Operand::Number(n))
            }
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok(match s.as_str() {
                    "true" => Operand::Bool(true),
                    "false" => Operand::Bool(false),
                    _ => Operand::Signal(s),
                })
            }
            Some(t) => self.fail(format!("expected a signal or a number, found {t:?}")),
            None => self.fail("unexpected end: expected a signal or a number".into()),
        }
    }
}

/// A parsed trigger: the expression and how many edge nodes it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub expr: Expr,
    pub edges: usize,
}

/// Parses an expression.
pub fn parse(src: &str) -> Result<Parsed, ParseError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        end: src.len(),
        edges: 0,
    };
    if p.toks.is_empty() {
        return p.fail("empty expression".into());
    }
    let expr = p.or()?;
    if p.pos < p.toks.len() {
        return p.fail("expected '&&', '||' or the end".into());
    }
    Ok(Parsed {
        expr,
        edges: p.edges,
    })
}

impl Expr {
    /// Every signal the expression reads, in order of appearance.
    pub fn signals(&self, out: &mut Vec<String>) {
        let mut op = |o: &Operand| {
            if let Operand::Signal(s) = o {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        };
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.signals(out);
                b.signals(out);
            }
            Expr::Not(a) | Expr::Rising(_, a) | Expr::Falling(_, a) => a.signals(out),
            Expr::Compare(a, _, b) => {
                op(a);
                op(b);
            }
            Expr::Truth(a) => op(a),
        }
    }

    /// Evaluates with the latest values. `edges` holds each edge node's
    /// inner value at the previous evaluation and is updated: every node
    /// is evaluated (no short-circuit), so an edge under a false `&&`
    /// still sees its input change.
    pub fn eval(&self, latest: &HashMap<String, Value>, edges: &mut [bool]) -> bool {
        match self {
            Expr::Or(a, b) => {
                let x = a.eval(latest, edges);
                let y = b.eval(latest, edges);
                x || y
            }
            Expr::And(a, b) => {
                let x = a.eval(latest, edges);
                let y = b.eval(latest, edges);
                x && y
            }
            Expr::Not(a) => !a.eval(latest, edges),
            Expr::Rising(i, a) => {
                let now = a.eval(latest, edges);
                let was = std::mem::replace(&mut edges[*i], now);
                now && !was
            }
            Expr::Falling(i, a) => {
                let now = a.eval(latest, edges);
                let was = std::mem::replace(&mut edges[*i], now);
                !now && was
            }
            Expr::Truth(o) => match value(o, latest) {
                Some(Value::Bool(b)) => b,
                Some(Value::Number(n)) => n != 0.0,
                _ => false,
            },
            Expr::Compare(a, cmp, b) => {
                let (Some(x), Some(y)) = (value(a, latest), value(b, latest)) else {
                    return false;
                };
                match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => match cmp {
                        Cmp::Gt => x > y,
                        Cmp::Ge => x >= y,
                        Cmp::Lt => x < y,
                        Cmp::Le => x <= y,
                        Cmp::Eq => x == y,
                        Cmp::Ne => x != y,
                    },
                    // Text compares only for (in)equality.
                    _ => match cmp {
                        Cmp::Eq => x == y,
                        Cmp::Ne => x != y,
                        _ => false,
                    },
                }
            }
        }
    }
}

fn value(o: &Operand, latest: &HashMap<String, Value>) -> Option<Value> {
    match o {
        Operand::Signal(s) => latest.get(s).cloned(),
        Operand::Number(n) => Some(Value::Number(*n)),
        Operand::Bool(b) => Some(Value::Bool(*b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(v: &[(&str, Value)]) -> HashMap<String, Value> {
        v.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn precedence_edges_and_signals() {
        let p =
            parse("Vehicle.Speed > 30 && rising(Vehicle.Brake.IsPressed) || !(Vehicle.X)").unwrap();
        assert_eq!(p.edges, 1);
        assert!(matches!(p.expr, Expr::Or(..)), "&& binds tighter than ||");
        let mut s = Vec::new();
        p.expr.signals(&mut s);
        assert_eq!(s, ["Vehicle.Speed", "Vehicle.Brake.IsPressed", "Vehicle.X"]);
        let mut edges = vec![false; p.edges];
        let on = vals(&[
            ("Vehicle.Speed", Value::Number(31.0)),
            ("Vehicle.Brake.IsPressed", Value::Bool(true)),
            ("Vehicle.X", Value::Bool(true)),
        ]);
        assert!(p.expr.eval(&on, &mut edges), "the rising edge");
        assert!(!p.expr.eval(&on, &mut edges), "held: no new edge");
        let slow = vals(&[
            ("Vehicle.Speed", Value::Number(-1e1)),
            ("Vehicle.Brake.IsPressed", Value::Bool(false)),
            ("Vehicle.X", Value::Number(0.0)),
        ]);
        assert!(p.expr.eval(&slow, &mut edges), "!X with X = 0");
    }

    #[test]
    fn errors_name_the_column() {
        for (src, col, what) in [
            ("Vehicle.Speed >", 16, "unexpected end"),
            ("Vehicle.Speed > 30 &", 20, "'&' alone"),
            ("(Vehicle.Speed > 30", 20, "expected ')'"),
            ("rising(Vehicle.Brake.IsPressed", 31, "close the edge"),
            ("Vehicle.Speed 30", 15, "expected '&&'"),
            ("30", 3, "number alone"),
            ("Vehicle.Speed > 3x", 18, "expected '&&'"),
            ("Vehicle.Speed # 3", 15, "unexpected character"),
            ("", 1, "empty"),
        ] {
            let e = parse(src).unwrap_err();
            assert_eq!(e.column, col, "{src}: {e}");
            assert!(e.message.contains(what), "{src}: {e}");
        }
    }
}
