//! A minimal, data-only pickle machine (the protocol 0–5 subset `torch.save` uses).
//!
//! Nothing is ever executed: `GLOBAL` yields a name, `REDUCE`/`BUILD`/`BINPERSID` yield
//! symbolic nodes that [`super::pt`] interprets.

use std::rc::Rc;

use super::TensorFileError;

/// Deepest nesting of compound values accepted (tuples within tuples, ...).
const MAX_DEPTH: u32 = 64;
/// Deepest MARK nesting accepted.
const MAX_MARKS: usize = 256;

/// A value produced by the pickle machine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// `None`.
    None,
    /// `True`/`False`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A str.
    Str(Rc<str>),
    /// bytes.
    Bytes(Rc<[u8]>),
    /// `module.name` from GLOBAL / STACK_GLOBAL.
    Global(Rc<str>, Rc<str>),
    /// A tuple.
    Tuple(Rc<Compound>),
    /// A list.
    List(Rc<Compound>),
    /// A dict, as flattened key/value pairs.
    Dict(Rc<Compound>),
    /// `persistent_load(items[0])`.
    PersId(Rc<Compound>),
    /// `items[0](*items[1])`.
    Reduce(Rc<Compound>),
    /// `items[0].__setstate__(items[1])`.
    Build(Rc<Compound>),
}

/// Children of a compound value plus its nesting depth.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compound {
    /// Nesting depth (1 + deepest child).
    pub depth: u32,
    /// The children.
    pub items: Vec<Value>,
}

impl Value {
    fn depth(&self) -> u32 {
        match self {
            Value::Tuple(c)
            | Value::List(c)
            | Value::Dict(c)
            | Value::PersId(c)
            | Value::Reduce(c)
            | Value::Build(c) => c.depth,
            _ => 0,
        }
    }
}

struct Vm<'a> {
    bytes: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Vec<Option<Value>>,
    /// Work budget for copy-on-write of shared lists/dicts.
    budget: usize,
}

fn perr(offset: usize, msg: impl Into<String>) -> TensorFileError {
    TensorFileError::Pickle { offset: offset as u64, msg: msg.into() }
}

fn compound(items: Vec<Value>, at: usize) -> Result<Rc<Compound>, TensorFileError> {
    let depth = 1 + items.iter().map(Value::depth).max().unwrap_or(0);
    if depth > MAX_DEPTH {
        return Err(perr(at, format!("values nested deeper than {MAX_DEPTH} levels")));
    }
    Ok(Rc::new(Compound { depth, items }))
}

impl<'a> Vm<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TensorFileError> {
        let at = self.pos;
        let end = at.checked_add(n).ok_or_else(|| perr(at, "length overflows"))?;
        let s = self.bytes.get(at..end).ok_or_else(|| perr(at, format!("truncated: {n} more bytes expected")))?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, TensorFileError> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }
    fn u16(&mut self) -> Result<u16, TensorFileError> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes(s.try_into().map_err(|_| perr(self.pos, "short"))?))
    }
    fn u32(&mut self) -> Result<u32, TensorFileError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes(s.try_into().map_err(|_| perr(self.pos, "short"))?))
    }
    fn line(&mut self) -> Result<&'a str, TensorFileError> {
        let at = self.pos;
        let rest = self.bytes.get(at..).unwrap_or(&[]);
        let n = rest.iter().position(|&b| b == b'\n').ok_or_else(|| perr(at, "unterminated text line"))?;
        let s = self.take(n + 1)?;
        std::str::from_utf8(s.get(..n).unwrap_or(&[])).map_err(|_| perr(at, "text line is not UTF-8"))
    }
    fn pop(&mut self, at: usize) -> Result<Value, TensorFileError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(perr(at, "stack underflow (would pop past a MARK)"));
        }
        self.stack.pop().ok_or_else(|| perr(at, "stack underflow"))
    }
    fn top(&mut self, at: usize) -> Result<&mut Value, TensorFileError> {
        self.stack.last_mut().ok_or_else(|| perr(at, "stack underflow"))
    }
    fn pop_mark(&mut self, at: usize) -> Result<Vec<Value>, TensorFileError> {
        let m = self.marks.pop().ok_or_else(|| perr(at, "no MARK on the stack"))?;
        if m > self.stack.len() {
            return Err(perr(at, "MARK above the stack top"));
        }
        Ok(self.stack.split_off(m))
    }
    fn push(&mut self, v: Value) {
        self.stack.push(v);
    }
    fn put(&mut self, idx: usize, at: usize) -> Result<(), TensorFileError> {
        let v = self.stack.last().cloned().ok_or_else(|| perr(at, "memo put on an empty stack"))?;
        // Memo indices are bounded by the pickle length (each PUT costs ≥ 2 bytes).
        if idx > self.bytes.len() {
            return Err(perr(at, format!("memo index {idx} is implausibly large")));
        }
        if self.memo.len() <= idx {
            self.memo.resize(idx + 1, None);
        }
        if let Some(slot) = self.memo.get_mut(idx) {
            *slot = Some(v);
        }
        Ok(())
    }
    fn get(&mut self, idx: usize, at: usize) -> Result<(), TensorFileError> {
        let v =
            self.memo.get(idx).cloned().flatten().ok_or_else(|| perr(at, format!("memo index {idx} was never set")))?;
        self.push(v);
        Ok(())
    }
    /// Appends to the list or dict on top of the stack, copying it if shared.
    fn extend_top(&mut self, items: Vec<Value>, dict: bool, at: usize) -> Result<(), TensorFileError> {
        let mut budget = self.budget;
        let target = self.top(at)?;
        let c = match (target, dict) {
            (Value::List(c), false) | (Value::Dict(c), true) => c,
            _ => return Err(perr(at, "APPEND/SETITEM target is not a list/dict")),
        };
        if Rc::strong_count(c) > 1 {
            budget =
                budget.checked_sub(c.items.len()).ok_or_else(|| perr(at, "too much copying of shared containers"))?;
        }
        let depth = items.iter().map(Value::depth).max().unwrap_or(0) + 1;
        if depth > MAX_DEPTH {
            return Err(perr(at, format!("values nested deeper than {MAX_DEPTH} levels")));
        }
        let inner = Rc::make_mut(c);
        inner.depth = inner.depth.max(depth);
        inner.items.extend(items);
        self.budget = budget;
        Ok(())
    }
}

/// Runs a pickle and returns the value left by STOP.
pub(crate) fn load(bytes: &[u8]) -> Result<Value, TensorFileError> {
    let mut vm = Vm { bytes, pos: 0, stack: Vec::new(), marks: Vec::new(), memo: Vec::new(), budget: 1 << 24 };
    loop {
        let at = vm.pos;
        let op = vm.u8()?;
        match op {
            0x80 => {
                let proto = vm.u8()?;
                if proto > 5 {
                    return Err(perr(at, format!("unsupported pickle protocol {proto}")));
                }
            }
            0x95 => {
                vm.take(8)?; // FRAME: framing is transparent.
            }
            b'.' => {
                let v = vm.pop(at)?;
                return Ok(v);
            }
            b'(' => {
                if vm.marks.len() >= MAX_MARKS {
                    return Err(perr(at, format!("more than {MAX_MARKS} nested MARKs")));
                }
                vm.marks.push(vm.stack.len());
            }
            b'0' => {
                vm.pop(at)?;
            }
            b'1' => {
                vm.pop_mark(at)?;
            }
            b'2' => {
                let v = vm.top(at)?.clone();
                vm.push(v);
            }
            b'c' => {
                let module: Rc<str> = vm.line()?.into();
                let name: Rc<str> = vm.line()?.into();
                vm.push(Value::Global(module, name));
            }
            0x93 => {
                let name = vm.pop(at)?;
                let module = vm.pop(at)?;
                match (module, name) {
                    (Value::Str(m), Value::Str(n)) => vm.push(Value::Global(m, n)),
                    _ => return Err(perr(at, "STACK_GLOBAL needs two strings")),
                }
            }
            b'q' => {
                let i = usize::from(vm.u8()?);
                vm.put(i, at)?;
            }
            b'r' => {
                let i = vm.u32()? as usize;
                vm.put(i, at)?;
            }
            0x94 => {
                let i = vm.memo.len();
                vm.put(i, at)?;
            }
            b'h' => {
                let i = usize::from(vm.u8()?);
                vm.get(i, at)?;
            }
            b'j' => {
                let i = vm.u32()? as usize;
                vm.get(i, at)?;
            }
            b')' => vm.push(Value::Tuple(compound(Vec::new(), at)?)),
            b't' => {
                let items = vm.pop_mark(at)?;
                vm.push(Value::Tuple(compound(items, at)?));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(vm.pop(at)?);
                }
                items.reverse();
                vm.push(Value::Tuple(compound(items, at)?));
            }
            b']' => vm.push(Value::List(compound(Vec::new(), at)?)),
            b'}' => vm.push(Value::Dict(compound(Vec::new(), at)?)),
            b'l' => {
                let items = vm.pop_mark(at)?;
                vm.push(Value::List(compound(items, at)?));
            }
            b'd' => {
                let items = vm.pop_mark(at)?;
                if items.len() % 2 != 0 {
                    return Err(perr(at, "DICT with an odd number of items"));
                }
                vm.push(Value::Dict(compound(items, at)?));
            }
            b'a' => {
                let v = vm.pop(at)?;
                vm.extend_top(vec![v], false, at)?;
            }
            b'e' => {
                let items = vm.pop_mark(at)?;
                vm.extend_top(items, false, at)?;
            }
            b's' => {
                let v = vm.pop(at)?;
                let k = vm.pop(at)?;
                vm.extend_top(vec![k, v], true, at)?;
            }
            b'u' => {
                let items = vm.pop_mark(at)?;
                if items.len() % 2 != 0 {
                    return Err(perr(at, "SETITEMS with an odd number of items"));
                }
                vm.extend_top(items, true, at)?;
            }
            b'X' => {
                let n = vm.u32()? as usize;
                let s = vm.take(n)?;
                let s = std::str::from_utf8(s).map_err(|_| perr(at, "BINUNICODE is not UTF-8"))?;
                vm.push(Value::Str(s.into()));
            }
            0x8c => {
                let n = usize::from(vm.u8()?);
                let s = vm.take(n)?;
                let s = std::str::from_utf8(s).map_err(|_| perr(at, "SHORT_BINUNICODE is not UTF-8"))?;
                vm.push(Value::Str(s.into()));
            }
            b'C' => {
                let n = usize::from(vm.u8()?);
                let s = vm.take(n)?;
                vm.push(Value::Bytes(s.into()));
            }
            b'B' => {
                let n = vm.u32()? as usize;
                let s = vm.take(n)?;
                vm.push(Value::Bytes(s.into()));
            }
            b'J' => {
                let v = vm.u32()? as i32;
                vm.push(Value::Int(i64::from(v)));
            }
            b'K' => {
                let v = vm.u8()?;
                vm.push(Value::Int(i64::from(v)));
            }
            b'M' => {
                let v = vm.u16()?;
                vm.push(Value::Int(i64::from(v)));
            }
            0x8a => {
                let n = usize::from(vm.u8()?);
                let s = vm.take(n)?;
                if n > 8 {
                    return Err(perr(at, format!("LONG1 of {n} bytes does not fit in 64 bits")));
                }
                let fill = if s.last().is_some_and(|&b| b & 0x80 != 0) { 0xFF } else { 0 };
                let mut buf = [fill; 8];
                buf.get_mut(..n).unwrap_or(&mut []).copy_from_slice(s);
                vm.push(Value::Int(i64::from_le_bytes(buf)));
            }
            b'G' => {
                let s = vm.take(8)?;
                let v = f64::from_be_bytes(s.try_into().map_err(|_| perr(at, "short float"))?);
                vm.push(Value::Float(v));
            }
            0x88 => vm.push(Value::Bool(true)),
            0x89 => vm.push(Value::Bool(false)),
            b'N' => vm.push(Value::None),
            b'Q' => {
                let pid = vm.pop(at)?;
                vm.push(Value::PersId(compound(vec![pid], at)?));
            }
            b'R' => {
                let args = vm.pop(at)?;
                let func = vm.pop(at)?;
                vm.push(Value::Reduce(compound(vec![func, args], at)?));
            }
            0x81 => {
                let args = vm.pop(at)?;
                let cls = vm.pop(at)?;
                vm.push(Value::Reduce(compound(vec![cls, args], at)?));
            }
            b'b' => {
                let state = vm.pop(at)?;
                let obj = vm.pop(at)?;
                vm.push(Value::Build(compound(vec![obj, state], at)?));
            }
            other => {
                return Err(perr(at, format!("unsupported pickle opcode 0x{other:02x}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile() {
        assert!(load(b"\x80\x02\xff.").is_err());
        assert!(load(&[b'('; 10_000]).is_err());
        let mut deep = vec![0x80, 2, b'N'];
        deep.extend(std::iter::repeat_n(0x85u8, 100_000));
        deep.push(b'.');
        assert!(load(&deep).is_err());
        assert!(load(b"").is_err());
        assert!(load(b"X\xff\xff\xff\xff").is_err());
        assert!(load(b"h\x05.").is_err());
        assert!(load(b"r\xff\xff\xff\x7fN.").is_err());
        // Repeated copying of a shared list stays within the budget.
        let mut big = vec![b']', b'q', 0];
        for _ in 0..20_000 {
            big.extend_from_slice(b"h\x00Na");
        }
        big.push(b'.');
        let _ = load(&big);
    }
}
