//! Links from a revision to its commit on a forge's web pages, when the Git remote is on a
//! forge whose page layout is known.
//!
//! # Guarantees
//! A link is made only from a remote whose host and path are plain (letters, digits, `.`, `-`,
//! `_`), without the remote's user or password, and only for a revision that names a 40-hex
//! commit (`main@sha1:<commit>`): nothing else of a revision reaches the link.

/// How a forge lays out its commit pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeStyle {
    /// GitHub and GitHub Enterprise: `/OWNER/REPO/commit/SHA`.
    Github,
    /// Gitea and Forgejo: `/OWNER/REPO/commit/SHA`.
    Gitea,
    /// GitLab: `/GROUP/…/REPO/-/commit/SHA`.
    Gitlab,
}

/// Where a repository's commits are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitLinks {
    /// `https://HOST/OWNER/REPO`.
    base: String,
    style: ForgeStyle,
}

/// Public forges known by their host.
const KNOWN_HOSTS: &[(&str, ForgeStyle)] = &[
    ("github.com", ForgeStyle::Github),
    ("gitlab.com", ForgeStyle::Gitlab),
    ("codeberg.org", ForgeStyle::Gitea),
];

impl CommitLinks {
    /// The commit pages of the repository at remote `url` (`https://`, `http://`, `ssh://` or
    /// `git@host:path`): on a known public forge, or any host when `forge` says which kind it
    /// is (the daemon's `--forge` for previews). `None` for any other remote.
    pub fn of_remote(url: &str, forge: Option<ForgeStyle>) -> Option<CommitLinks> {
        let (scheme, rest) = match url.split_once("://") {
            Some((scheme, rest)) => (scheme, rest),
            None => ("scp", url),
        };
        let (host, path) = match scheme {
            "https" | "http" | "ssh" => rest.split_once('/')?,
            "scp" => rest.split_once(':')?,
            _ => return None,
        };
        // Never the remote's credentials.
        let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
        let host_name = host.split(':').next().unwrap_or(host);
        let style = forge.or_else(|| {
            KNOWN_HOSTS
                .iter()
                .find(|(known, _)| known.eq_ignore_ascii_case(host_name))
                .map(|(_, style)| *style)
        })?;
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let segments: Vec<&str> = path.split('/').collect();
        if segments.len() < 2 || !segments.iter().all(|s| is_plain(s)) || !is_host(host) {
            return None;
        }
        // The web pages are served over HTTPS wherever SSH is; an HTTP remote keeps HTTP.
        let (web_scheme, web_host) = match scheme {
            "http" => ("http", host),
            "https" => ("https", host),
            _ => ("https", host_name),
        };
        Some(CommitLinks {
            base: format!("{web_scheme}://{web_host}/{}", segments.join("/")),
            style,
        })
    }

    /// The page of the commit `revision` names (`main@sha1:<40 hex>`), if it names one.
    pub fn commit(&self, revision: &str) -> Option<String> {
        let sha = commit_of(revision)?;
        Some(match self.style {
            ForgeStyle::Github | ForgeStyle::Gitea => format!("{}/commit/{sha}", self.base),
            ForgeStyle::Gitlab => format!("{}/-/commit/{sha}", self.base),
        })
    }
}

/// The commit a revision names (`REF@sha1:<40 hex>`).
pub fn commit_of(revision: &str) -> Option<&str> {
    let (_, sha) = revision.rsplit_once("@sha1:")?;
    (sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some(sha)
}

fn is_plain(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

fn is_host(host: &str) -> bool {
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'))
}
