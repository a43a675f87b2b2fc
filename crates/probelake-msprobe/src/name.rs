//! msprobe's entry names: `Functional.linear.0.forward`, `Module.l1.Linear.forward.0`,
//! `Module.l1.Linear.parameters_grad.0`, `y.0.debug`. Parsed from the right, because module
//! paths contain dots and digits.

/// The parts of an entry name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryName<'a> {
    /// The name without counter and direction: `Functional.linear`, `Module.l1.Linear`.
    pub op: &'a str,
    /// The call counter, when there is one.
    pub call: Option<i64>,
    /// `forward`, `backward`, `parameters_grad`, `debug`, or `None` for names of no known form.
    pub direction: Option<&'a str>,
    /// The API family: the first dot-separated part (`Functional`, `Module`, …).
    pub api: &'a str,
}

/// Whether the entry is a parameter-gradient entry (its fields are parameter names).
pub fn is_parameters_grad(name: &str) -> bool {
    // Split as bytes: a `str` split by a char goes through the general searcher.
    let mut rev = name.as_bytes().rsplit(|&b| b == b'.');
    let grad = Some(&b"parameters_grad"[..]);
    rev.next() == grad || rev.next() == grad
}

/// Splits an entry name into its parts.
///
/// ```
/// use probelake_msprobe::parse_entry_name;
/// let api = parse_entry_name("Functional.linear.3.backward");
/// assert_eq!((api.op, api.call, api.direction, api.api), ("Functional.linear", Some(3), Some("backward"), "Functional"));
/// let module = parse_entry_name("Module.layers.0.Linear.forward.2");
/// assert_eq!((module.op, module.call, module.direction), ("Module.layers.0.Linear", Some(2), Some("forward")));
/// let grad = parse_entry_name("Module.fc.Linear.parameters_grad");
/// assert_eq!((grad.op, grad.call, grad.direction), ("Module.fc.Linear", None, Some("parameters_grad")));
/// ```
pub fn parse_entry_name(name: &str) -> EntryName<'_> {
    // Byte scans for the dots: `split` and `rsplitn` by a char went through the general
    // searcher, ~700 instructions a name (1% of an import).
    let dot = |b: &u8| *b == b'.';
    let bytes = name.as_bytes();
    let api = name.get(..bytes.iter().position(dot).unwrap_or(name.len())).unwrap_or(name);
    let last_dot = bytes.iter().rposition(dot);
    let last = last_dot.map_or(name, |d| &name[d + 1..]);
    let before_last = last_dot.map(|d| &name[..d]);
    let second_dot = before_last.and_then(|b| b.as_bytes().iter().rposition(dot));
    let second = before_last.map(|b| second_dot.map_or(b, |d| &b[d + 1..]));
    let rest = before_last.zip(second_dot).map(|(b, d)| &b[..d]);
    const DIRECTIONS: [&str; 4] = ["forward", "backward", "parameters_grad", "debug"];
    let known = |s: &str| DIRECTIONS.contains(&s);
    let counter = |s: &str| s.parse::<i64>().ok();
    let (op, call, direction) = match (second, rest) {
        // `….{n}.forward` (APIs, debug) or `….forward.{n}` (modules, parameters_grad).
        (Some(second), Some(rest)) if known(last) && counter(second).is_some() => (rest, counter(second), Some(last)),
        (Some(second), Some(rest)) if known(second) && counter(last).is_some() => (rest, counter(last), Some(second)),
        (Some(_), _) if last == "parameters_grad" => (before_last.unwrap_or(name), None, Some(last)),
        _ => (name, None, None),
    };
    EntryName { op, call, direction, api }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first version, by `split` and `rsplitn`, kept as the reference.
    fn by_splits(name: &str) -> EntryName<'_> {
        let api = name.split('.').next().unwrap_or(name);
        let mut parts = name.rsplitn(3, '.');
        let last = parts.next().unwrap_or_default();
        let second = parts.next();
        let rest = parts.next();
        let known = |s: &str| ["forward", "backward", "parameters_grad", "debug"].contains(&s);
        let (op, call, direction) = match (second, rest) {
            (Some(second), Some(rest)) if known(last) && second.parse::<i64>().is_ok() => {
                (rest, second.parse().ok(), Some(last))
            }
            (Some(second), Some(rest)) if known(second) && last.parse::<i64>().is_ok() => {
                (rest, last.parse().ok(), Some(second))
            }
            (Some(_), _) if last == "parameters_grad" => (&name[..name.len() - last.len() - 1], None, Some(last)),
            _ => (name, None, None),
        };
        EntryName { op, call, direction, api }
    }

    #[test]
    fn byte_scans_split_as_the_string_splits_did() {
        let parts =
            ["", ".", "Functional", "linear", "0", "12", "-3", "forward", "backward", "parameters_grad", "debug", "é"];
        let mut names = Vec::new();
        for a in parts {
            for b in parts {
                for c in parts {
                    names.push(format!("{a}.{b}.{c}"));
                    names.push(format!("{a}{b}.{c}"));
                    names.push(format!("Module.{a}.{b}{c}"));
                }
            }
        }
        for name in &names {
            assert_eq!(parse_entry_name(name), by_splits(name), "{name:?}");
            let mut rev = name.rsplit('.');
            let (last, second) = (rev.next(), rev.next());
            let grad = last == Some("parameters_grad") || second == Some("parameters_grad");
            assert_eq!(is_parameters_grad(name), grad, "{name:?}");
        }
    }

    #[test]
    fn parses_every_form() {
        let p = parse_entry_name("Primitive.norm.RmsNorm.0.forward");
        assert_eq!((p.op, p.call, p.direction), ("Primitive.norm.RmsNorm", Some(0), Some("forward")));
        let d = parse_entry_name("y_grad.0.debug");
        assert_eq!((d.op, d.call, d.direction, d.api), ("y_grad", Some(0), Some("debug"), "y_grad"));
        let odd = parse_entry_name("NoDirection.foo");
        assert_eq!((odd.op, odd.call, odd.direction), ("NoDirection.foo", None, None));
        let g = parse_entry_name("Module.fc.Linear.parameters_grad.0");
        assert_eq!((g.op, g.call, g.direction), ("Module.fc.Linear", Some(0), Some("parameters_grad")));
        assert!(is_parameters_grad("Module.fc.Linear.parameters_grad.0"));
        assert!(!is_parameters_grad("Module.fc.Linear.forward.0"));
    }
}
