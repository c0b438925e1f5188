//! Errors in scenario files: always with the file, and with line and column whenever the
//! problem has a place in it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::yaml::Loc;

/// One problem in a scenario file. Displays as `path:line:col: message` (`path: message` when
/// the problem has no place in the file, e.g. it cannot be read).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: PathBuf,
    /// 1-based; 0 when unknown.
    pub line: u32,
    /// 1-based; 0 when unknown.
    pub col: u32,
    pub message: String,
}

impl ScenarioError {
    pub fn new(file: &Path, loc: Loc, message: impl Into<String>) -> Self {
        ScenarioError { file: file.to_owned(), line: loc.line, col: loc.col, message: message.into() }
    }

    pub fn loc(&self) -> Loc {
        Loc::new(self.line, self.col)
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}: {}", self.file.display(), self.line, self.col, self.message)
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)
        }
    }
}

/// Every problem found in one file or one directory of scenarios, in file and position order;
/// never empty. Displays one error per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl ScenarioErrors {
    pub fn first(&self) -> &ScenarioError {
        &self.0[0]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ScenarioError> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<ScenarioError> for ScenarioErrors {
    fn from(e: ScenarioError) -> Self {
        ScenarioErrors(vec![e])
    }
}

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl<'a> IntoIterator for &'a ScenarioErrors {
    type Item = &'a ScenarioError;
    type IntoIter = std::slice::Iter<'a, ScenarioError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Where something is in a scenario file, for the runner's reports: displays as
/// `path:line:col`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLoc {
    pub file: PathBuf,
    pub loc: Loc,
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.loc.line, self.loc.col)
    }
}
