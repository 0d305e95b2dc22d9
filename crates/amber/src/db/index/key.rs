//! Index keys: how a key becomes the bytes a `PIndex` orders by.
//!
//! Keys compare as their encodings, byte by byte (`memcmp`), so an encoding
//! must order like the keys: unsigned integers big-endian, signed integers
//! big-endian with the sign bit flipped (so that -1 < 0), byte strings and
//! strings as their bytes. A key inside a tuple, or the key of a
//! `PMultiIndex` (followed by a sequence number), must also end where it
//! ends: fixed-width encodings do; a variable-width one is escaped (each
//! 0x00 byte written as 0x00 0xFF) and terminated by 0x00 0x00, which keeps
//! the order (a terminated key sorts before every longer key it prefixes,
//! because 0x00 0x00 < 0x00 0xFF and < any other byte pair) — the scheme of
//! FoundationDB's tuple layer.

/// A key type of [`PIndex`](crate::PIndex) and
/// [`PMultiIndex`](crate::PMultiIndex): one whose encoding, compared as
/// bytes, orders like the keys.
///
/// Implemented for the unsigned and signed integers, `bool`, `str`,
/// `String`, `[u8]`, `Vec<u8>`, `[u8; N]` and tuples of up to four keys.
/// A type of your own implements [`encode`](Self::encode),
/// [`decode`](Self::decode) and [`name`](Self::name), often by encoding a
/// tuple of its fields, with `type Borrowed = Self`.
pub trait IndexKey {
    /// The form keys are given in to lookups, inserts and range bounds:
    /// `str` for `String`, `[u8]` for `Vec<u8>`, the type itself for the
    /// others. It must encode a key as the key type does (a mismatch finds
    /// wrong entries, but never reads outside the index).
    type Borrowed: IndexKey + ?Sized;

    /// The key type's name in the schema catalog: a database records it
    /// with the index, and a program whose key type has another name is
    /// refused ([`Error::SchemaMismatch`](crate::Error::SchemaMismatch)).
    /// Borrowed and owned forms share a name (`str` and `String` are both
    /// `"String"`); a tuple's is made of its elements' (`"(u32, String)"`).
    fn name() -> String;

    /// Appends the key's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// The key whose encoding is all of `bytes`; `None` if `bytes` is not
    /// one (a damaged node, reported as [`Error::Corrupt`](crate::Error::Corrupt)).
    fn decode(bytes: &[u8]) -> Option<Self>
    where
        Self: Sized;

    /// Appends an encoding that also says where it ends (for a key followed
    /// by more bytes). The default escapes [`encode`](Self::encode)'s bytes
    /// and terminates them; a fixed-width encoding needs neither and
    /// overrides this with `encode`.
    fn encode_nested(&self, out: &mut Vec<u8>) {
        let mut plain = Vec::new();
        self.encode(&mut plain);
        escape(&plain, out);
    }

    /// The key at the start of `bytes` in [`encode_nested`](Self::encode_nested)'s
    /// form, and how many bytes it took.
    fn decode_nested(bytes: &[u8]) -> Option<(Self, usize)>
    where
        Self: Sized,
    {
        let (plain, used) = unescape(bytes)?;
        Some((Self::decode(&plain)?, used))
    }
}

/// Appends `plain` escaped and terminated (see the module docs).
fn escape(plain: &[u8], out: &mut Vec<u8>) {
    for &b in plain {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// The bytes an escaped, terminated encoding at the start of `bytes` stands
/// for, and its length.
fn unescape(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut plain = Vec::new();
    let mut i = 0;
    loop {
        match *bytes.get(i)? {
            0 => match *bytes.get(i + 1)? {
                0 => return Some((plain, i + 2)),
                0xFF => plain.push(0),
                _ => return None,
            },
            b => {
                plain.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
}

/// Fixed-width keys: their nested form is their plain form.
macro_rules! fixed_key {
    ($($t:ty, $name:literal, $width:expr, |$v:ident| $enc:expr, |$b:ident| $dec:expr;)*) => {$(
        impl IndexKey for $t {
            type Borrowed = Self;
            fn name() -> String {
                $name.into()
            }
            fn encode(&self, out: &mut Vec<u8>) {
                let $v = *self;
                out.extend_from_slice(&$enc);
            }
            fn decode(bytes: &[u8]) -> Option<Self> {
                let $b: [u8; $width] = bytes.try_into().ok()?;
                $dec
            }
            fn encode_nested(&self, out: &mut Vec<u8>) {
                self.encode(out);
            }
            fn decode_nested(bytes: &[u8]) -> Option<(Self, usize)> {
                Some((Self::decode(bytes.get(..$width)?)?, $width))
            }
        }
    )*};
}

fixed_key! {
    u8, "u8", 1, |v| [v], |b| Some(b[0]);
    u16, "u16", 2, |v| v.to_be_bytes(), |b| Some(u16::from_be_bytes(b));
    u32, "u32", 4, |v| v.to_be_bytes(), |b| Some(u32::from_be_bytes(b));
    u64, "u64", 8, |v| v.to_be_bytes(), |b| Some(u64::from_be_bytes(b));
    u128, "u128", 16, |v| v.to_be_bytes(), |b| Some(u128::from_be_bytes(b));
    i8, "i8", 1, |v| [v as u8 ^ 0x80], |b| Some((b[0] ^ 0x80) as i8);
    i16, "i16", 2, |v| (v as u16 ^ (1 << 15)).to_be_bytes(),
        |b| Some((u16::from_be_bytes(b) ^ (1 << 15)) as i16);
    i32, "i32", 4, |v| (v as u32 ^ (1 << 31)).to_be_bytes(),
        |b| Some((u32::from_be_bytes(b) ^ (1 << 31)) as i32);
    i64, "i64", 8, |v| (v as u64 ^ (1 << 63)).to_be_bytes(),
        |b| Some((u64::from_be_bytes(b) ^ (1 << 63)) as i64);
    i128, "i128", 16, |v| (v as u128 ^ (1 << 127)).to_be_bytes(),
        |b| Some((u128::from_be_bytes(b) ^ (1 << 127)) as i128);
    bool, "bool", 1, |v| [u8::from(v)], |b| match b[0] { 0 => Some(false), 1 => Some(true), _ => None };
}

impl<const N: usize> IndexKey for [u8; N] {
    type Borrowed = Self;
    fn name() -> String {
        format!("[u8; {N}]")
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok()
    }
    fn encode_nested(&self, out: &mut Vec<u8>) {
        self.encode(out);
    }
    fn decode_nested(bytes: &[u8]) -> Option<(Self, usize)> {
        Some((Self::decode(bytes.get(..N)?)?, N))
    }
}

impl IndexKey for [u8] {
    type Borrowed = Self;
    fn name() -> String {
        "Vec<u8>".into()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl IndexKey for Vec<u8> {
    type Borrowed = [u8];
    fn name() -> String {
        "Vec<u8>".into()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(bytes.to_vec())
    }
}

impl IndexKey for str {
    type Borrowed = Self;
    fn name() -> String {
        "String".into()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
}

impl IndexKey for String {
    type Borrowed = str;
    fn name() -> String {
        "String".into()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        String::from_utf8(bytes.to_vec()).ok()
    }
}

/// Tuples: each element nested but the last, which ends the key.
macro_rules! tuple_key {
    ($($t:ident $v:ident),*; $last:ident $lv:ident) => {
        impl<$($t: IndexKey,)* $last: IndexKey> IndexKey for ($($t,)* $last,) {
            type Borrowed = Self;
            fn name() -> String {
                let names: Vec<String> = vec![$($t::name(),)* $last::name()];
                format!("({})", names.join(", "))
            }
            fn encode(&self, out: &mut Vec<u8>) {
                let ($($v,)* $lv,) = self;
                $($v.encode_nested(out);)*
                $lv.encode(out);
            }
            fn decode(bytes: &[u8]) -> Option<Self> {
                let mut at = 0;
                $(
                    let ($v, used) = $t::decode_nested(bytes.get(at..)?)?;
                    at += used;
                )*
                Some(($($v,)* $last::decode(bytes.get(at..)?)?,))
            }
            fn encode_nested(&self, out: &mut Vec<u8>) {
                let ($($v,)* $lv,) = self;
                $($v.encode_nested(out);)*
                $lv.encode_nested(out);
            }
            fn decode_nested(bytes: &[u8]) -> Option<(Self, usize)> {
                let mut at = 0;
                $(
                    let ($v, used) = $t::decode_nested(bytes.get(at..)?)?;
                    at += used;
                )*
                let ($lv, used) = $last::decode_nested(bytes.get(at..)?)?;
                Some((($($v,)* $lv,), at + used))
            }
        }
    };
}

tuple_key!(A a; B b);
tuple_key!(A a, B b; C c);
tuple_key!(A a, B b, C c; D d);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::crash::SplitMix;
    use std::fmt::Debug;

    fn enc<K: IndexKey + ?Sized>(k: &K) -> Vec<u8> {
        let mut out = Vec::new();
        k.encode(&mut out);
        out
    }

    fn nested<K: IndexKey + ?Sized>(k: &K) -> Vec<u8> {
        let mut out = Vec::new();
        k.encode_nested(&mut out);
        out
    }

    /// Encodings order like the keys, plain and nested, and decode back.
    fn check<K: IndexKey + Ord + Debug>(keys: &[K]) {
        for a in keys {
            assert_eq!(K::decode(&enc(a)).as_ref(), Some(a), "{a:?}");
            let mut n = nested(a);
            let len = n.len();
            n.extend_from_slice(&[0, 7, 0xFF]);
            let (back, used) = K::decode_nested(&n).expect("nested decodes");
            assert_eq!((&back, used), (a, len), "{a:?}");
            for b in keys {
                assert_eq!(enc(a).cmp(&enc(b)), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(nested(a).cmp(&nested(b)), a.cmp(b), "{a:?} vs {b:?} nested");
            }
        }
    }

    #[test]
    fn encodings_order_like_keys() {
        let mut rng = SplitMix::new(5);
        let mut ints: Vec<i64> = (0..60).map(|_| rng.next_u64() as i64).collect();
        ints.extend([i64::MIN, -1, 0, 1, i64::MAX]);
        check(&ints);
        check(&ints.iter().map(|&i| i as i32).collect::<Vec<_>>());
        check(&ints.iter().map(|&i| i as u64).collect::<Vec<_>>());
        check(&ints.iter().map(|&i| i as u16).collect::<Vec<_>>());
        let strs: Vec<String> = ["", "\0", "\0\0", "a", "a\0", "a\0b", "ab", "b", "\u{ff}", "é"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        check(&strs);
        check(&strs.iter().map(|s| s.clone().into_bytes()).collect::<Vec<_>>());
        let mut pairs = Vec::new();
        for s in &strs {
            for &i in &[-3i32, 0, 9] {
                pairs.push((s.clone(), i));
                pairs.push((s.clone(), i));
            }
        }
        check(&pairs);
        let triples: Vec<(u8, String, Vec<u8>)> = pairs
            .iter()
            .map(|(s, i)| (*i as u8, s.clone(), s.clone().into_bytes()))
            .collect();
        check(&triples);
        check(&[false, true]);
        assert_eq!(<(u32, String)>::name(), "(u32, String)");
        assert_eq!(enc("ab"), enc(&"ab".to_string()));
        assert!(String::decode(&[0xFF]).is_none());
        assert!(String::decode_nested(&[b'a', 0, 3]).is_none());
    }
}
