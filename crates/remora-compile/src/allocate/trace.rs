//! Tracing: `trace` and `trace-file`. The compiled program writes each
//! traced value (tagged by its [`loops::TraceSite`]) on its standard
//! output, before its results, in the binary data format; the driver
//! prints them, as the interpreter does, once the program has succeeded
//! (a program that fails runs again on the interpreter, which prints its
//! own).
//!
//! The interpreter prints in the order it evaluates: a `trace` compiles
//! only where the code runs exactly as often, and in the same order, as
//! the interpreter evaluates it: outside any loop, or inside a map's loops
//! (each cell once, in order, and not in parallel: see [`in_order`]), and
//! never inside a delayed map (made away from where it was written).

use super::*;

impl<'m> Alloc<'m> {
    pub(super) fn trace(
        &mut self,
        name: &'static str,
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        let (site, x, y) = match (name, args) {
            ("trace" | "trace/text", [x, y]) => (
                loops::TraceSite {
                    text: name == "trace/text",
                    file: None,
                },
                x,
                y,
            ),
            ("trace-file", [_, x, y]) => {
                let Kind::App { args, .. } = &e.kind else {
                    return Some(unsupported("the intrinsic trace-file"));
                };
                let Some(path) = args.first().and_then(files::literal_text) else {
                    return Some(unsupported("trace-file of a path computed at run time"));
                };
                (
                    loops::TraceSite {
                        text: false,
                        file: Some(path),
                    },
                    x,
                    y,
                )
            }
            ("trace" | "trace/text" | "trace-file", _) => {
                return Some(unsupported(format!(
                    "{name} applied to fewer arguments than it takes"
                )));
            }
            _ => return None,
        };
        Some(self.traced(site, x, y, body))
    }

    fn traced(
        &mut self,
        site: loops::TraceSite,
        x: &Val<'m>,
        y: &Val<'m>,
        body: &mut Vec<Stmt>,
    ) -> Res<Val<'m>> {
        if self.delayed > 0 || self.loop_depth != self.ordered_loops {
            return unsupported("trace inside a loop that is not a map's");
        }
        // The value, contiguous, and its shape.
        let (elem, dims) = match x {
            Val::Scalar(elem, _) => (*elem, Vec::new()),
            Val::Array(v) => (v.elem, v.dims.clone()),
            Val::Rotated(r) => (r.src.elem, r.dims.clone()),
            _ => return unsupported("trace of a value that is not Int, Float or Bool atoms"),
        };
        let data = self.alloc("traced", elem, dims.clone(), body);
        match x {
            Val::Scalar(_, value) => body.push(Stmt::Store {
                buf: data.buf,
                index: Expr::Int(0),
                value: value.clone(),
            }),
            x => self.copy(x.clone(), &data, body)?,
        }
        let shape = self.fresh("traced_shape");
        body.push(Stmt::Alloc {
            buf: shape,
            elem: Elem::Int,
            len: Expr::Int(dims.len().max(1) as i64),
        });
        for (k, d) in dims.iter().enumerate() {
            body.push(Stmt::Store {
                buf: shape,
                index: Expr::Int(k as i64),
                value: d.clone(),
            });
        }
        let tag = self.out.traces.len() as i64;
        self.out.traces.push(site);
        let code = match elem {
            Elem::Int => 0,
            Elem::Float => 1,
            Elem::Bool => 2,
        };
        body.push(Stmt::Call {
            func: "rt_trace",
            args: vec![
                Expr::Int(tag),
                Expr::Int(code),
                Expr::Int(dims.len() as i64),
                Expr::Addr {
                    buf: shape,
                    index: std::boxed::Box::new(Expr::Int(0)),
                },
                Expr::Addr {
                    buf: data.buf,
                    index: std::boxed::Box::new(data.offset.clone()),
                },
            ],
        });
        Ok(y.clone())
    }
}

/// Whether `body` calls `rt_trace` anywhere.
fn traces(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Call { func, .. } => *func == "rt_trace",
        Stmt::For { body, .. } | Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => traces(body),
        Stmt::If { then, otherwise, .. } => traces(then) || traces(otherwise),
        _ => false,
    })
}

/// Every loop that traces runs its iterations in order, on one thread.
pub(super) fn in_order(body: &mut [Stmt]) {
    for s in body {
        match s {
            Stmt::For { parallel, body, .. } => {
                if *parallel && traces(body) {
                    *parallel = false;
                }
                in_order(body);
            }
            Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => in_order(body),
            Stmt::If { then, otherwise, .. } => {
                in_order(then);
                in_order(otherwise);
            }
            _ => {}
        }
    }
}
