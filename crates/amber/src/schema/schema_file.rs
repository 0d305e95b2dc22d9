//! The schema file: a program's layouts and their evolution (earlier field
//! names, defaults), written by the program (`Migration::save`) so that
//! `amber migrate`, which has none of the program's types, can run the
//! migration on a closed database. Conversions are code and cannot be
//! saved: a migration that has them runs from the program.
//!
//! Format (`docs/design.md`, "Migration"), all integers little-endian:
//! `"AMBERSCH"`, u32 version 1, u32 type count, then per type the catalog
//! encoding of its layout (u32 length, bytes) and its fields' evolution
//! (u32 count; per field: name, u16 count of earlier names and each name,
//! a default tag — 0 none, 1 zero, 2 bytes — and for 2 the bytes with a
//! u16 length; names are u16 length and UTF-8), and last the CRC-32C of
//! everything before it.

use super::desc::{Prim, Shape, StoredKind, StoredType};
use super::encoding::put_str;
use super::evolve::{FieldEvolution, Fill, Wanted};
use crate::format::bytes::{Cursor, Short};
use crate::format::crc;

const MAGIC: &[u8; 8] = b"AMBERSCH";
const VERSION: u32 = 1;

/// The schema file's bytes for `w`.
pub fn encode(w: &Wanted) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    let mut names: Vec<&String> = w.layouts.keys().collect();
    names.sort();
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for name in names {
        let desc = w.layouts[name].encode();
        out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&desc);
        let mut fields: Vec<(&String, &FieldEvolution)> = w
            .evolution
            .get(name)
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        fields.sort_by(|a, b| a.0.cmp(b.0));
        out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
        for (field, e) in fields {
            put_str(&mut out, field);
            out.extend_from_slice(&(e.renamed_from.len() as u16).to_le_bytes());
            for n in &e.renamed_from {
                put_str(&mut out, n);
            }
            match &e.default {
                Fill::None => out.push(0),
                Fill::Zero => out.push(1),
                Fill::Bytes(b) => {
                    out.push(2);
                    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
    }
    let c = crc(&out);
    out.extend_from_slice(&c.to_le_bytes());
    out
}

/// Reads a schema file's bytes; the error says what is wrong.
pub fn decode(b: &[u8]) -> Result<Wanted, String> {
    let short = |_: Short| "the schema file is truncated".to_string();
    if b.len() < MAGIC.len() + 8 || &b[..8] != MAGIC {
        return Err("not an Amber schema file (no AMBERSCH magic)".into());
    }
    let (body, tail) = b.split_at(b.len() - 4);
    if crc(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
        return Err("the schema file's checksum does not match (damaged or truncated)".into());
    }
    let mut c = Cursor::new(&body[8..]);
    let version = c.u32().map_err(short)?;
    if version != VERSION {
        return Err(format!(
            "schema file format version {version}; this Amber reads version {VERSION}"
        ));
    }
    let str = |c: &mut Cursor<'_>| -> Result<String, String> {
        let n = c.u16().map_err(short)? as usize;
        String::from_utf8(c.bytes(n).map_err(short)?.to_vec())
            .map_err(|_| "a name in the schema file is not UTF-8".to_string())
    };
    let mut w = Wanted::default();
    for _ in 0..c.u32().map_err(short)? {
        let n = c.u32().map_err(short)? as usize;
        let t = StoredType::decode(c.bytes(n).map_err(short)?)
            .map_err(|e| format!("a layout in the schema file does not decode: {e}"))?;
        // A program's array types are those of its buffers, all of one
        // form: a migration writes what it reads here into the catalog,
        // where another would be taken for damage.
        if let Shape::Array(elem) = &t.shape
            && t != StoredType::array_of(elem.clone(), t.size)
        {
            return Err(format!(
                "the array layout `{}` in the schema file is not one a program has",
                t.name
            ));
        }
        let mut fields = std::collections::HashMap::new();
        for _ in 0..c.u32().map_err(short)? {
            let field = str(&mut c)?;
            let renamed_from = (0..c.u16().map_err(short)?)
                .map(|_| str(&mut c))
                .collect::<Result<_, _>>()?;
            let default = match c.u8().map_err(short)? {
                0 => Fill::None,
                1 => Fill::Zero,
                2 => {
                    let n = c.u16().map_err(short)? as usize;
                    Fill::Bytes(c.bytes(n).map_err(short)?.to_vec())
                }
                x => return Err(format!("unknown default tag {x} in the schema file")),
            };
            fields.insert(
                field,
                FieldEvolution {
                    renamed_from,
                    default,
                },
            );
        }
        if !fields.is_empty() {
            w.evolution.insert(t.name.clone(), fields);
        }
        w.layouts.insert(t.name.clone(), t);
    }
    if c.remaining() != 0 {
        return Err("trailing bytes in the schema file".into());
    }
    for t in w.layouts.values() {
        if let Shape::Struct(fields) = &t.shape {
            for f in fields {
                buffers_present(&w, &t.name, &f.kind)?;
            }
        }
    }
    Ok(w)
}

/// Checks that the buffers a field of kind `k` holds have their array
/// layouts in `w`, with the element size the field states, as a program's
/// schema has them (`check.rs`): a migration writes both into the catalog,
/// where buffers of another size than their field's would be taken for
/// damage.
fn buffers_present(w: &Wanted, ty: &str, k: &StoredKind) -> Result<(), String> {
    let need = |t: StoredType| match w.layouts.get(&t.name) {
        Some(have) if *have == t => Ok(()),
        _ => Err(format!(
            "`{ty}` holds buffers of `{}`, which the schema file lacks or lays out otherwise",
            t.name
        )),
    };
    match k {
        StoredKind::Vec { elem, elem_size } => need(StoredType::array_of((**elem).clone(), *elem_size)),
        StoredKind::Bytes | StoredKind::Str => need(StoredType::array_of(StoredKind::Prim(Prim::U8), 1)),
        StoredKind::Array { elem, .. } => buffers_present(w, ty, elem),
        StoredKind::Struct { fields, .. } => fields
            .iter()
            .try_for_each(|f| buffers_present(w, ty, &f.kind)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::check::Program;
    use crate::schema::desc::{
        Evolution, FieldDefault, FieldDesc, FieldKind, Prim, TypeDesc,
    };

    static T: TypeDesc = TypeDesc {
        name: "T",
        size: 16,
        align: 8,
        fields: &[
            FieldDesc {
                name: "a",
                offset: 0,
                kind: &FieldKind::Prim(Prim::U64),
                evolution: Evolution {
                    renamed_from: &["b", "c"],
                    default: FieldDefault::None,
                },
            },
            FieldDesc {
                name: "d",
                offset: 8,
                kind: &FieldKind::Vec {
                    elem: &FieldKind::Prim(Prim::U32),
                    elem_size: 4,
                },
                evolution: Evolution {
                    renamed_from: &[],
                    default: FieldDefault::Zero,
                },
            },
        ],
    };

    #[test]
    fn round_trips_and_refuses_damage() {
        let mut w = Wanted::default();
        w.add(Program::Struct(&T)).expect("add");
        let b = encode(&w);
        let r = decode(&b).expect("decode");
        assert_eq!(r.layouts, w.layouts);
        assert_eq!(r.evolution, w.evolution);
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert!(decode(&bad).unwrap_err().contains("checksum"));
        assert!(decode(&b[..b.len() - 1]).is_err());
        assert!(decode(b"hello").unwrap_err().contains("magic"));
    }
}
