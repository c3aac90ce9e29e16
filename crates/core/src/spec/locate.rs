//! Where each field of a YAML document is, so an error found after parsing (an endpoint outside
//! its subnet, a duplicate name) can name the line and column, and an error serde reports at a
//! line and column can name the field path.
//!
//! Paths are written as users read them: `spec.workers[0].machine.placement`.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser};

/// A line and column in a file, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// The position of every mapping key and scalar value of one document, by field path.
#[derive(Debug, Default, Clone)]
pub struct PositionIndex {
    /// `(path, position)` in document order; a path appears once for its key and once for its
    /// value.
    entries: Vec<(String, Position)>,
    /// The first position of each path: a hostile file with a finding per list entry would
    /// otherwise cost a walk over every entry per finding.
    first: HashMap<String, Position>,
}

impl PositionIndex {
    /// Indexes `text`. A document that does not parse gives the entries read before the error.
    pub fn of(text: &str) -> Self {
        let mut builder = Builder::default();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let position = Position {
                line: span.start.line(),
                column: span.start.col() + 1,
            };
            builder.visit(event, position);
        }
        let mut first = HashMap::with_capacity(builder.entries.len());
        for (path, position) in &builder.entries {
            first.entry(path.clone()).or_insert(*position);
        }
        PositionIndex {
            entries: builder.entries,
            first,
        }
    }

    /// Where the field at `path` is: its key for a mapping entry, its value for a list item.
    pub fn position(&self, path: &str) -> Option<Position> {
        self.first.get(path).copied()
    }

    /// The position of `path`, or of its closest ancestor that exists in the file (a defaulted
    /// field has no position of its own: point at the section it belongs to).
    pub fn nearest_position(&self, path: &str) -> Option<Position> {
        let mut current = path;
        loop {
            if let Some(position) = self.position(current) {
                return Some(position);
            }
            current = parent(current)?;
        }
    }

    /// The field at `position`: the entry that starts there, or else the last one before it.
    pub fn path_at(&self, position: Position) -> Option<&str> {
        self.entries
            .iter()
            .filter(|(_, pos)| *pos <= position)
            .max_by_key(|(_, pos)| *pos)
            .map(|(path, _)| path.as_str())
    }

    /// The key names directly under `path` (to suggest a name).
    pub fn children(&self, path: &str) -> Vec<&str> {
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}.")
        };
        let mut names: Vec<&str> = self
            .entries
            .iter()
            .filter_map(|(p, _)| p.strip_prefix(prefix.as_str()))
            .filter(|rest| !rest.contains(['.', '[']))
            .collect();
        names.dedup();
        names
    }
}

/// The path one level up: `a.b[2]` → `a.b`, `a.b` → `a`, `a` → none.
pub fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

/// Appends a key to a path.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[derive(Debug)]
enum Frame {
    /// In a mapping at `path`; `key` is the key whose value comes next, if one was read.
    Mapping { path: String, key: Option<String> },
    /// In a sequence at `path`; `next` is the index of the next item.
    Sequence { path: String, next: usize },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    entries: Vec<(String, Position)>,
}

impl Builder {
    fn visit(&mut self, event: Event<'_>, position: Position) {
        match event {
            Event::Scalar(value, ..) => {
                if let Some(Frame::Mapping {
                    path,
                    key: key @ None,
                }) = self.stack.last_mut()
                {
                    // A scalar in key position: remember it and index the key.
                    let full = join(path, &value);
                    *key = Some(value.into_owned());
                    self.entries.push((full, position));
                } else {
                    let path = self.value_path();
                    self.entries.push((path, position));
                }
            }
            Event::Alias(_) => {
                let path = self.value_path();
                self.entries.push((path, position));
            }
            Event::MappingStart(..) => {
                let path = self.value_path();
                self.entries.push((path.clone(), position));
                self.stack.push(Frame::Mapping { path, key: None });
            }
            Event::SequenceStart(..) => {
                let path = self.value_path();
                self.entries.push((path.clone(), position));
                self.stack.push(Frame::Sequence { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }

    /// The path of the value that starts now, advancing the enclosing frame past it.
    fn value_path(&mut self) -> String {
        match self.stack.last_mut() {
            None => String::new(),
            Some(Frame::Mapping { path, key }) => match key.take() {
                Some(key) => join(path, &key),
                None => path.clone(),
            },
            Some(Frame::Sequence { path, next }) => {
                *next += 1;
                format!("{path}[{}]", *next - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
spec:
  endpoint:
    address: 10.0.0.1
  workers:
    - pool: general
      machine: {cores: 4}
    - pool: big
";

    #[test]
    fn keys_and_list_items_have_their_line_and_column() {
        let index = PositionIndex::of(DOC);
        assert_eq!(
            index.position("spec.endpoint.address"),
            Some(Position { line: 3, column: 5 })
        );
        assert_eq!(
            index.position("spec.workers[1].pool"),
            Some(Position { line: 7, column: 7 })
        );
        assert_eq!(
            index.position("spec.workers[0].machine.cores"),
            Some(Position {
                line: 6,
                column: 17
            })
        );
    }

    #[test]
    fn a_position_maps_back_to_the_field_there() {
        let index = PositionIndex::of(DOC);
        assert_eq!(
            index.path_at(Position {
                line: 3,
                column: 14
            }),
            Some("spec.endpoint.address")
        );
        assert_eq!(
            index.path_at(Position { line: 7, column: 7 }),
            Some("spec.workers[1].pool")
        );
    }

    #[test]
    fn defaulted_fields_point_at_their_section() {
        let index = PositionIndex::of(DOC);
        assert_eq!(
            index.nearest_position("spec.endpoint.port"),
            index.position("spec.endpoint")
        );
    }

    #[test]
    fn parent_walks_up_keys_and_indices() {
        assert_eq!(parent("a.b[2]"), Some("a.b"));
        assert_eq!(parent("a.b"), Some("a"));
        assert_eq!(parent("a"), Some(""));
        assert_eq!(parent(""), None);
    }
}
