//! The book (`docs/`, built with `mdbook build docs`) and the README: the generated reference
//! pages are what the code generates now, every page is in the summary, and every internal
//! link reaches a page and, with `#anchor`, a heading of it (mdBook checks no links itself).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

const BOOK: &str = "docs/src";

#[test]
fn the_generated_reference_pages_are_what_the_code_generates() {
    let stale: Vec<&str> = capstan::reference::pages()
        .iter()
        .filter(|(name, text)| {
            std::fs::read_to_string(Path::new(BOOK).join("reference").join(name)).ok()
                != Some(text.clone())
        })
        .map(|(name, _)| *name)
        .collect();
    assert!(
        stale.is_empty(),
        "stale reference pages {stale:?}: run `cargo run -- reference --out docs/src/reference`"
    );
}

#[test]
fn every_page_is_in_the_summary_and_every_summary_entry_exists() {
    let pages = book_pages();
    let summary = Page::read(&Path::new(BOOK).join("SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = summary
        .links
        .iter()
        .map(|link| normalise(&Path::new(BOOK).join(&link.target)))
        .collect();
    let missing: Vec<&PathBuf> = listed.iter().filter(|p| !p.exists()).collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md lists missing pages {missing:?}"
    );
    let orphans: Vec<&PathBuf> = pages
        .keys()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(*p))
        .collect();
    assert!(orphans.is_empty(), "pages not in SUMMARY.md: {orphans:?}");
}

#[test]
fn every_internal_link_reaches_a_page_and_its_heading() {
    let mut pages = book_pages();
    let readme = PathBuf::from("README.md");
    pages.insert(readme.clone(), Page::read(&readme));
    let mut broken = Vec::new();
    for (path, page) in &pages {
        for link in &page.links {
            let target = if link.target.is_empty() {
                path.clone()
            } else {
                normalise(&path.parent().unwrap_or(Path::new("")).join(&link.target))
            };
            if !target.exists() {
                broken.push(format!("{}: {} (no such file)", path.display(), link.text));
                continue;
            }
            let Some(anchor) = &link.anchor else { continue };
            let headings = pages
                .get(&target)
                .map(|p| p.anchors.clone())
                .unwrap_or_default();
            if !headings.contains(anchor) {
                broken.push(format!(
                    "{}: {} (no heading #{anchor} in {})",
                    path.display(),
                    link.text,
                    target.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_a_planted_broken_link() {
    let page = Page::parse("# Title\n\n[gone](missing.md) [here](#title) [not](#nowhere)\n");
    assert_eq!(page.anchors, BTreeSet::from(["title".to_owned()]));
    let targets: Vec<(&str, Option<&str>)> = page
        .links
        .iter()
        .map(|l| (l.target.as_str(), l.anchor.as_deref()))
        .collect();
    assert_eq!(
        targets,
        [
            ("missing.md", None),
            ("", Some("title")),
            ("", Some("nowhere"))
        ]
    );
}

#[test]
fn the_readme_is_a_front_door_not_a_manual() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines: move detail into the book"
    );
}

/// A Markdown page as mdBook reads it: its headings' anchors and its relative links.
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<Link>,
}

struct Link {
    text: String,
    target: String,
    anchor: Option<String>,
}

impl Page {
    fn read(path: &Path) -> Page {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        Page::parse(&text)
    }

    fn parse(text: &str) -> Page {
        let mut anchors = BTreeSet::new();
        let mut links = Vec::new();
        let mut heading: Option<String> = None;
        for event in Parser::new(text) {
            match event {
                Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H6 => {
                    heading = Some(String::new());
                }
                Event::Text(t) | Event::Code(t) => {
                    if let Some(h) = heading.as_mut() {
                        h.push_str(&t);
                    }
                }
                Event::End(TagEnd::Heading(_)) => {
                    if let Some(h) = heading.take() {
                        anchors.insert(anchor_of(&h));
                    }
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    let url = dest_url.to_string();
                    if url.contains("://") || url.starts_with("mailto:") {
                        continue;
                    }
                    let (target, anchor) = match url.split_once('#') {
                        Some((target, anchor)) => (target.to_owned(), Some(anchor.to_owned())),
                        None => (url.clone(), None),
                    };
                    links.push(Link {
                        text: url,
                        target,
                        anchor,
                    });
                }
                _ => {}
            }
        }
        Page { anchors, links }
    }
}

/// A heading's id as mdBook makes it: lower case, spaces to `-`, only letters, digits, `-`
/// and `_` kept.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every `.md` file of the book, read.
fn book_pages() -> BTreeMap<PathBuf, Page> {
    let mut pages = BTreeMap::new();
    let mut folders = vec![PathBuf::from(BOOK)];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read the book") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.insert(normalise(&path), Page::read(&path));
            }
        }
    }
    pages
}

/// `a/b/../c.md` as `a/c.md`, so a page is one key however a link reaches it.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The test files under `tests/` (one folder per test binary), as `tests/<binary>/<file>.rs`.
fn test_files() -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for binary in std::fs::read_dir("tests").expect("tests/").flatten() {
        let Ok(entries) = std::fs::read_dir(binary.path()) else {
            continue;
        };
        for file in entries.flatten() {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "rs") {
                files.insert(path.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files
}

#[test]
fn every_test_file_is_in_the_index_and_every_file_it_names_exists() {
    let index = std::fs::read_to_string(format!("{BOOK}/contributing/test-index.md"))
        .expect("the index page");
    let named: BTreeSet<String> = index
        .split('`')
        .filter(|part| part.starts_with("tests/") && part.ends_with(".rs"))
        .map(str::to_owned)
        .collect();
    let files = test_files();
    let missing: Vec<&String> = files.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "add these to docs/src/contributing/test-index.md (their binary's table, and the feature they prove): {missing:#?}"
    );
    let gone: Vec<&String> = named.difference(&files).collect();
    assert!(
        gone.is_empty(),
        "the index names files that are gone: {gone:#?}"
    );
    assert!(files.len() > 100, "the tests were found: {}", files.len());
}
