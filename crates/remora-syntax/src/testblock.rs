//! Test blocks in `.remora` files (core.md §5.1), and our case files.
//!
//! A *test block* is a maximal run of comment lines one of which, with every
//! `;` blanked and trimmed, is `==`. After `==` come directives:
//!
//! * core.md's: `tags { … }`, `modes { … }`, `entry: name`, then runs —
//!   `input { v … }` / `input @ path`, optionally followed by `output { v }` /
//!   `output @ path` / `error: REGEX`;
//! * ours, for the phases before evaluation: `parse { TREE }` (the printed
//!   desugared tree, compared with whitespace runs collapsed),
//!   `parses-like { SOURCE }` (another text that must parse to the same
//!   tree) and `parse-error: REGEX` (a diagnostic matching REGEX); for the
//!   checker, `type { T }` and `type-error: REGEX` (read now, checked once
//!   the checker exists).
//!
//! A *case file* holds many small programs: a comment line
//! `;;; case NAME` starts each case, which runs to the next such line. A
//! file without case lines is one case, the whole file.

/// One case: a program and its test blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub name: String,
    /// 1-based line of the case's first line.
    pub line: usize,
    /// The whole file with every line outside the case blanked, so that
    /// positions in diagnostics are positions in the file.
    pub source: String,
    pub blocks: Vec<Block>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    /// 1-based line of the `==`.
    pub line: usize,
    pub tags: Vec<String>,
    pub modes: Vec<String>,
    pub entry: Option<String>,
    pub runs: Vec<Run>,
    pub checks: Vec<Check>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Values written in the block.
    Inline(String),
    /// A data file, relative to the test file.
    File(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Output(Values),
    /// The run fails with an error matching this regular expression.
    Error(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub input: Option<Values>,
    pub outcome: Option<Outcome>,
}

/// Our expectations about the phases before evaluation.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    Parse(String),
    ParsesLike(String),
    ParseError(String),
    /// `type { T }`: the program's (last top-level item's) type, written
    /// as `remora check` prints it or as the documentation writes it.
    Type(String),
    /// `type-error: REGEX`: the checker reports a matching error.
    TypeError(String),
    /// `dump: LEVEL`: the program lowered to the compiler's level `LEVEL`
    /// (`maps`), its print snapshot-tested.
    Dump(String),
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with(';')
}

fn case_header(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix(";;;")?;
    let rest = rest.trim_start_matches(';').trim_start();
    let name = rest.strip_prefix("case")?;
    if !name.starts_with(char::is_whitespace) {
        return None;
    }
    name.split_whitespace().next()
}

/// Splits a file into its cases and parses their blocks.
pub fn parse_cases(text: &str, file_stem: &str) -> Result<Vec<Case>, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let starts: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| case_header(l).map(|n| (i, n)))
        .collect();
    let ranges: Vec<(String, usize, usize)> = if starts.is_empty() {
        vec![(file_stem.to_string(), 0, lines.len())]
    } else {
        if lines[..starts[0].0]
            .iter()
            .any(|l| !l.trim().is_empty() && !is_comment(l))
        {
            return Err("text before the first `;;; case` line".into());
        }
        starts
            .iter()
            .enumerate()
            .map(|(k, &(i, n))| {
                let end = starts.get(k + 1).map_or(lines.len(), |s| s.0);
                (n.to_string(), i, end)
            })
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    let mut cases = Vec::new();
    for (name, start, end) in ranges {
        if !seen.insert(name.clone()) {
            return Err(format!("line {}: a second case named `{name}`", start + 1));
        }
        let source = lines
            .iter()
            .enumerate()
            .map(|(i, l)| if (start..end).contains(&i) { *l } else { "" })
            .collect::<Vec<_>>()
            .join("\n");
        let blocks = parse_blocks(&lines[start..end], start).map_err(|e| format!("case `{name}`: {e}"))?;
        cases.push(Case {
            name,
            line: start + 1,
            source,
            blocks,
        });
    }
    Ok(cases)
}

/// The test blocks among these lines (`first` is the 0-based number of the
/// first line in the file).
pub fn parse_blocks(lines: &[&str], first: usize) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !is_comment(lines[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && is_comment(lines[i]) {
            i += 1;
        }
        let run: Vec<String> = lines[start..i].iter().map(|l| l.replace(';', " ")).collect();
        if let Some(eq) = run.iter().position(|l| l.trim() == "==") {
            let text = run[eq + 1..].join("\n");
            let line = first + start + eq + 1;
            let mut block = parse_directives(&text).map_err(|e| format!("block at line {line}: {e}"))?;
            block.line = line;
            blocks.push(block);
        }
    }
    Ok(blocks)
}

struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }
    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }
    fn word(&mut self) -> &'a str {
        let rest = self.rest();
        let n = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }
    /// After `keyword:` — the rest of the line.
    fn line(&mut self) -> &'a str {
        let rest = self.rest();
        let n = rest.find('\n').unwrap_or(rest.len());
        self.pos += n;
        rest[..n].trim()
    }
    /// `{ … }` with nested braces and string literals; returns the inside.
    fn braced(&mut self) -> Result<&'a str, String> {
        self.skip_ws();
        let rest = self.rest();
        if !rest.starts_with('{') {
            return Err("expected `{`".into());
        }
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += i + 1;
                        return Ok(&rest[1..i]);
                    }
                }
                _ => {}
            }
        }
        Err("unclosed `{`".into())
    }
    /// `{ … }` or `@ path`.
    fn values(&mut self) -> Result<Values, String> {
        self.skip_ws();
        if let Some(after) = self.rest().strip_prefix('@') {
            self.pos = self.text.len() - after.len();
            let path = self.line();
            if path.is_empty() {
                return Err("expected a path after `@`".into());
            }
            return Ok(Values::File(path.to_string()));
        }
        Ok(Values::Inline(self.braced()?.trim().to_string()))
    }
    fn colon(&mut self, keyword: &str) -> Result<(), String> {
        match self.rest().strip_prefix(':') {
            Some(after) => {
                self.pos = self.text.len() - after.len();
                Ok(())
            }
            None => Err(format!("expected `:` after `{keyword}`")),
        }
    }
}

fn parse_directives(text: &str) -> Result<Block, String> {
    let mut s = Scanner { text, pos: 0 };
    let mut block = Block::default();
    let mut seen_runs = false;
    loop {
        s.skip_ws();
        if s.rest().is_empty() {
            break;
        }
        let word = s.word();
        match word {
            "tags" | "modes" | "entry" if seen_runs => {
                return Err(format!("`{word}` after the runs"));
            }
            "tags" => block.tags = s.braced()?.split_whitespace().map(String::from).collect(),
            "modes" => block.modes = s.braced()?.split_whitespace().map(String::from).collect(),
            "entry" => {
                s.colon(word)?;
                block.entry = Some(s.line().to_string());
            }
            "input" => {
                seen_runs = true;
                block.runs.push(Run {
                    input: Some(s.values()?),
                    outcome: None,
                });
            }
            "output" | "error" => {
                seen_runs = true;
                let outcome = if word == "output" {
                    Outcome::Output(s.values()?)
                } else {
                    s.colon(word)?;
                    Outcome::Error(s.line().to_string())
                };
                match block.runs.last_mut() {
                    Some(run) if run.outcome.is_none() => run.outcome = Some(outcome),
                    _ => block.runs.push(Run {
                        input: None,
                        outcome: Some(outcome),
                    }),
                }
            }
            "parse" => block.checks.push(Check::Parse(s.braced()?.to_string())),
            "parses-like" => block.checks.push(Check::ParsesLike(s.braced()?.to_string())),
            "parse-error" => {
                s.colon(word)?;
                block.checks.push(Check::ParseError(s.line().to_string()));
            }
            "type" => block.checks.push(Check::Type(s.braced()?.trim().to_string())),
            "type-error" => {
                s.colon(word)?;
                block.checks.push(Check::TypeError(s.line().to_string()));
            }
            "dump" => {
                s.colon(word)?;
                block.checks.push(Check::Dump(s.line().trim().to_string()));
            }
            "" => return Err(format!("unexpected `{}`", s.rest().chars().next().unwrap_or(' '))),
            other => return Err(format!("unknown directive `{other}`")),
        }
    }
    Ok(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cases_and_keeps_line_numbers() {
        let text = ";;; case a\n;; ==\n;; parse { 1 }\n1\n;;; case b\n;; ==\n;; parse-error: oops\n(\n";
        let cases = parse_cases(text, "f").unwrap_or_default();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].name, "b");
        assert_eq!(cases[1].line, 5);
        assert_eq!(cases[1].source.lines().nth(7), Some("("));
        assert_eq!(cases[1].source.lines().nth(3), Some(""));
        assert_eq!(cases[0].blocks[0].checks, vec![Check::Parse(" 1 ".into())]);
        assert_eq!(cases[1].blocks[0].checks, vec![Check::ParseError("oops".into())]);
    }

    #[test]
    fn core_runs() {
        let lines = [
            ";; desc",
            ";; ==",
            ";; entry: go",
            ";; input { 1 2 } output { 3 }",
            ";; input @ data/add.in",
            ";; output @ data/add.out",
            ";; error: divide",
        ];
        let blocks = parse_blocks(&lines, 0).unwrap_or_default();
        assert_eq!(blocks.len(), 1);
        let b = &blocks[0];
        assert_eq!(b.entry.as_deref(), Some("go"));
        assert_eq!(b.runs.len(), 3);
        assert_eq!(
            b.runs[0].outcome,
            Some(Outcome::Output(Values::Inline("3".into())))
        );
        assert_eq!(b.runs[1].input, Some(Values::File("data/add.in".into())));
        assert_eq!(b.runs[2].outcome, Some(Outcome::Error("divide".into())));
    }

    #[test]
    fn comment_runs_without_eq_are_not_blocks() {
        let lines = [";; just a comment", "(+ 1 2)"];
        assert_eq!(parse_blocks(&lines, 0).map(|b| b.len()), Ok(0));
    }

    #[test]
    fn type_directives() {
        let lines = [";; ==", ";; type { [Int 3] }", ";; type-error: Ill-shaped"];
        let blocks = parse_blocks(&lines, 0).unwrap_or_default();
        assert_eq!(
            blocks[0].checks,
            vec![
                Check::Type("[Int 3]".into()),
                Check::TypeError("Ill-shaped".into())
            ]
        );
    }

    #[test]
    fn unknown_directive_is_an_error() {
        let lines = [";; ==", ";; prase { 1 }"];
        assert!(parse_blocks(&lines, 0).is_err());
    }
}
