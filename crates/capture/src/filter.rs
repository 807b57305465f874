//! `thinwan analyze --filter EXPR`: a small, documented subset of pcap-filter(7) syntax,
//! parsed once into a typed expression ([`Expr`]) that is then matched against every TCP
//! packet.
//!
//! Grammar (keywords lower case; `&&`, `||`, `!` are accepted for `and`, `or`, `not`):
//!
//! ```text
//! expr    := and ("or" and)*
//! and     := unary ("and" unary)*
//! unary   := "not" unary | "(" expr ")" | primary
//! primary := "tcp"
//!          | [dir] "host" ADDRESS          (IPv4 or IPv6)
//!          | [dir] "port" N                (0 … 65535)
//!          | [dir] "net" ADDRESS "/" LEN   (a CIDR prefix)
//! dir     := "src" | "dst"                 (none: either end)
//! ```
//!
//! `not` binds tighter than `and`, which binds tighter than `or` (as in pcap-filter).
//! What pcap-filter has and this does not: protocols other than `tcp` (the analyser only
//! reads TCP), `portrange`, `net A mask M`, byte offsets, and repeating a value without
//! its keyword (`port 80 or 443`: write `port 80 or port 443`). An unknown word is an
//! error naming it and its position (1-based character).

use std::fmt;
use std::net::IpAddr;

use crate::ip::{in_net, TcpPacket};

/// Which end of a packet a primary looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The source.
    Src,
    /// The destination.
    Dst,
    /// Either.
    Either,
}

/// A parsed filter expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// Every TCP packet.
    Tcp,
    /// An address at one end.
    Host(End, IpAddr),
    /// A port at one end.
    Port(End, u16),
    /// An address inside a prefix at one end.
    Net(End, IpAddr, u8),
    /// Negation.
    Not(Box<Expr>),
    /// Both.
    And(Box<Expr>, Box<Expr>),
    /// Either.
    Or(Box<Expr>, Box<Expr>),
}

/// Why a filter expression does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// 1-based character position of the offending word (the length + 1 at the end).
    pub position: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at position {}: {}", self.position, self.what)
    }
}

impl std::error::Error for FilterError {}

impl Expr {
    /// Parse `text` (grammar in the module docs).
    pub fn parse(text: &str) -> Result<Expr, FilterError> {
        let toks = tokenize(text);
        let mut p = Parser { toks: &toks, i: 0, end: text.chars().count() + 1 };
        if toks.is_empty() {
            return Err(FilterError { position: 1, what: "empty filter".into() });
        }
        let e = p.or()?;
        match p.peek() {
            None => Ok(e),
            Some(t) => Err(t.err(format!("unexpected word {:?} (expected 'and', 'or' or the end)", t.text))),
        }
    }

    /// Does the TCP packet `p` match?
    pub fn matches(&self, p: &TcpPacket) -> bool {
        let at = |end: End, f: &dyn Fn(IpAddr, u16) -> bool| match end {
            End::Src => f(p.src, p.sport),
            End::Dst => f(p.dst, p.dport),
            End::Either => f(p.src, p.sport) || f(p.dst, p.dport),
        };
        match self {
            Expr::Tcp => true,
            Expr::Host(end, a) => at(*end, &|x, _| x == *a),
            Expr::Port(end, n) => at(*end, &|_, port| port == *n),
            Expr::Net(end, a, len) => at(*end, &|x, _| in_net(x, *a, *len)),
            Expr::Not(e) => !e.matches(p),
            Expr::And(a, b) => a.matches(p) && b.matches(p),
            Expr::Or(a, b) => a.matches(p) || b.matches(p),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = |e: &End| match e {
            End::Src => "src ",
            End::Dst => "dst ",
            End::Either => "",
        };
        match self {
            Expr::Tcp => write!(f, "tcp"),
            Expr::Host(e, a) => write!(f, "{}host {a}", end(e)),
            Expr::Port(e, n) => write!(f, "{}port {n}", end(e)),
            Expr::Net(e, a, l) => write!(f, "{}net {a}/{l}", end(e)),
            Expr::Not(x) => write!(f, "not {x}"),
            Expr::And(a, b) => write!(f, "({a} and {b})"),
            Expr::Or(a, b) => write!(f, "({a} or {b})"),
        }
    }
}

#[derive(Clone, Debug)]
struct Tok {
    text: String,
    pos: usize,
}

impl Tok {
    fn err(&self, what: String) -> FilterError {
        FilterError { position: self.pos, what }
    }
}

fn tokenize(text: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut cur: Option<Tok> = None;
    for (i, c) in text.chars().enumerate() {
        let pos = i + 1;
        let single = matches!(c, '(' | ')' | '!');
        if c.is_whitespace() || single {
            toks.extend(cur.take());
            if single {
                toks.push(Tok { text: c.to_string(), pos });
            }
            continue;
        }
        match cur.as_mut() {
            Some(t) => t.text.push(c),
            None => cur = Some(Tok { text: c.to_string(), pos }),
        }
    }
    toks.extend(cur);
    toks
}

struct Parser<'a> {
    toks: &'a [Tok],
    i: usize,
    /// Position past the end, for "expected … at the end" errors.
    end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i)
    }

    fn next(&mut self, expected: &str) -> Result<&Tok, FilterError> {
        let end = self.end;
        let t = self.toks.get(self.i).ok_or_else(|| FilterError {
            position: end,
            what: format!("the filter ends where {expected} was expected"),
        })?;
        self.i += 1;
        Ok(t)
    }

    fn is(&self, words: &[&str]) -> bool {
        self.peek().is_some_and(|t| words.contains(&t.text.as_str()))
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while self.is(&["or", "||"]) {
            self.i += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.unary()?;
        while self.is(&["and", "&&"]) {
            self.i += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.is(&["not", "!"]) {
            self.i += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.is(&["("]) {
            let open = self.next("(")?.pos;
            let e = self.or()?;
            let end = self.end;
            match self.toks.get(self.i) {
                Some(t) if t.text == ")" => self.i += 1,
                Some(t) => return Err(t.err(format!("unexpected word {:?} (expected ')')", t.text))),
                None => {
                    return Err(FilterError {
                        position: end,
                        what: format!("the '(' at position {open} is not closed"),
                    })
                }
            }
            return Ok(e);
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, FilterError> {
        let t =
            self.next("a filter word ('tcp', 'host', 'port', 'net', 'src', 'dst', 'not' or '(')")?.clone();
        let (end, kw) = match t.text.as_str() {
            "src" => (End::Src, self.next("'host', 'port' or 'net' after 'src'")?.clone()),
            "dst" => (End::Dst, self.next("'host', 'port' or 'net' after 'dst'")?.clone()),
            _ => (End::Either, t),
        };
        match kw.text.as_str() {
            "tcp" if end == End::Either => Ok(Expr::Tcp),
            "host" => {
                let v = self.next("an address after 'host'")?;
                let a = v.text.parse().map_err(|_| v.err(format!("{:?} is not an IP address", v.text)))?;
                Ok(Expr::Host(end, a))
            }
            "port" => {
                let v = self.next("a port number after 'port'")?;
                let n = v.text.parse().map_err(|_| v.err(format!("{:?} is not a port number (0 … 65535)", v.text)))?;
                Ok(Expr::Port(end, n))
            }
            "net" => {
                let v = self.next("a prefix (address/length) after 'net'")?;
                let bad = || v.err(format!("{:?} is not a network prefix like 10.0.0.0/8", v.text));
                let (a, l) = v.text.split_once('/').ok_or_else(bad)?;
                let a: IpAddr = a.parse().map_err(|_| bad())?;
                let l: u8 = l.parse().map_err(|_| bad())?;
                if l > if a.is_ipv4() { 32 } else { 128 } {
                    return Err(bad());
                }
                Ok(Expr::Net(end, a, l))
            }
            _ => Err(kw.err(format!(
                "unknown word {:?} (known: tcp, host, port, net, src, dst, and, or, not, parentheses; docs/analyze.md)",
                kw.text
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::TcpFlags;
    use proptest::prelude::*;

    fn pkt(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> TcpPacket {
        TcpPacket {
            src: src.into(),
            dst: dst.into(),
            sport,
            dport,
            ip_len: 40,
            payload: 0,
            seq: 0,
            ack: 0,
            flags: TcpFlags::default(),
            ts: None,
        }
    }

    #[test]
    fn precedence_is_not_then_and_then_or() {
        let e = Expr::parse("port 1 or not port 2 and host 10.0.0.1").unwrap();
        // port 1 or ((not port 2) and host 10.0.0.1)
        let want = Expr::Or(
            Box::new(Expr::Port(End::Either, 1)),
            Box::new(Expr::And(
                Box::new(Expr::Not(Box::new(Expr::Port(End::Either, 2)))),
                Box::new(Expr::Host(End::Either, "10.0.0.1".parse().unwrap())),
            )),
        );
        assert_eq!(e, want);
        assert_eq!(
            Expr::parse("(port 1 || port 2) && !tcp").unwrap().to_string(),
            "((port 1 or port 2) and not tcp)"
        );
    }

    #[test]
    fn directions_hosts_ports_and_nets_match() {
        let p = pkt([10, 1, 2, 3], 3389, [192, 168, 0, 9], 50_000);
        let m = |s: &str| Expr::parse(s).unwrap().matches(&p);
        assert!(m("tcp"));
        assert!(m("src port 3389") && !m("dst port 3389") && m("port 3389"));
        assert!(m("dst host 192.168.0.9") && !m("src host 192.168.0.9"));
        assert!(m("src net 10.0.0.0/8") && !m("dst net 10.0.0.0/8") && m("net 192.168.0.0/16"));
        assert!(m("port 50000 and not (host 1.2.3.4 or port 22)"));
        assert!(!m("not tcp"));
        assert!(m("host ::1 or tcp") && !m("host ::1"));
    }

    #[test]
    fn unknown_words_are_named_with_their_position() {
        let e = Expr::parse("port 3389 and udp").unwrap_err();
        assert_eq!(e.position, 15);
        assert!(e.what.contains("unknown word \"udp\""), "{e}");
        let e = Expr::parse("portrange 1-2").unwrap_err();
        assert_eq!((e.position, e.what.contains("\"portrange\"")), (1, true));
        let e = Expr::parse("src tcp").unwrap_err();
        assert_eq!(e.position, 5, "{e}");
    }

    fn expr() -> impl Strategy<Value = Expr> {
        let end = prop_oneof![Just(End::Src), Just(End::Dst), Just(End::Either)];
        let addr =
            prop_oneof![any::<[u8; 4]>().prop_map(IpAddr::from), any::<[u16; 8]>().prop_map(IpAddr::from),];
        let leaf = prop_oneof![
            Just(Expr::Tcp),
            (end.clone(), addr.clone()).prop_map(|(e, a)| Expr::Host(e, a)),
            (end.clone(), any::<u16>()).prop_map(|(e, n)| Expr::Port(e, n)),
            (end, addr, 0u8..=32).prop_map(|(e, a, l)| Expr::Net(e, a, l)),
        ];
        leaf.prop_recursive(4, 24, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::And(Box::new(a), Box::new(b))),
                (inner.clone(), inner).prop_map(|(a, b)| Expr::Or(Box::new(a), Box::new(b))),
            ]
        })
    }

    proptest! {
        /// Display → parse gives the same expression back (the printed form is valid input).
        #[test]
        fn printed_expressions_parse_back(e in expr()) {
            prop_assert_eq!(Expr::parse(&e.to_string()).unwrap(), e);
        }

        /// Any text: an expression or an error with a position inside it (or just past it), never a panic.
        #[test]
        fn any_text_parses_or_names_a_position(text in "[a-z0-9 ()!&|./:]{0,40}") {
            if let Err(e) = Expr::parse(&text) {
                prop_assert!(e.position >= 1 && e.position <= text.chars().count() + 1, "{e}");
            }
        }
    }

    #[test]
    fn bad_values_and_structure_are_errors() {
        let pos = |s: &str| Expr::parse(s).unwrap_err().position;
        assert_eq!(pos("port 70000"), 6);
        assert_eq!(pos("host 10.0.0"), 6);
        assert_eq!(pos("net 10.0.0.0/33"), 5);
        assert_eq!(pos("net 10.0.0.0"), 5);
        assert_eq!(pos("(port 1"), 8, "the unclosed '(' is reported at the end");
        assert_eq!(pos("port 1 port 2"), 8);
        assert_eq!(pos("port"), 5);
        assert_eq!(pos(""), 1);
        assert_eq!(pos("port 1 and"), 11);
    }
}
