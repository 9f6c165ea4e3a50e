//! Files: `read-file-f32bin` (the floats read by the runtime, a file it
//! cannot read failing there, so that the interpreter runs the program
//! again and gives its message), and `read-file` of a path known when
//! compiling (an input the driver reads: its text is a Remora expression
//! to parse, check and run).

use super::*;

impl<'m> Alloc<'m> {
    pub(super) fn files(
        &mut self,
        name: &'static str,
        indices: &[Index],
        args: &[Val<'m>],
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Res<Val<'m>>> {
        Some(match (name, args, indices) {
            ("read-file", [_], _) => self.read_file(e),
            ("read-file-f32bin", [Val::Array(path)], [_, shape]) if path.dims.len() == 1 => {
                self.read_f32bin(path, shape, body)
            }
            _ => return None,
        })
    }

    /// `read-file` of a path written in the program: an input of the
    /// program, of the asserted type, that the driver reads.
    fn read_file(&mut self, e: &'m maps::Expr) -> Res<Val<'m>> {
        let Kind::App { args, .. } = &e.kind else {
            return unsupported("the intrinsic read-file");
        };
        let Some(path) = args.first().and_then(literal_text) else {
            return unsupported("read-file of a path computed at run time");
        };
        let elem = elem_of(&e.ty.atom)?;
        let dims = self.dims(&e.ty.shape)?;
        if !dims.iter().all(|d| matches!(d, Expr::Int(n) if *n >= 0)) {
            return unsupported("read-file of a shape known only at run time");
        }
        let buf = self.fresh("file");
        self.out.files.push(loops::FileInput {
            input: self.out.inputs.len(),
            path,
            elem,
        });
        self.out.inputs.push(loops::Input {
            buf,
            elem,
            dims: dims.iter().cloned().map(Extent::Equal).collect(),
        });
        Ok(cell_val(View::contiguous(buf, elem, dims)))
    }

    /// As many little-endian `f32` as `shape` holds, from the start of
    /// the file named by the code points `path`, laid out in `shape`.
    fn read_f32bin(&mut self, path: &View, shape: &Index, body: &mut Vec<Stmt>) -> Res<Val<'m>> {
        let dims = self.index(shape)?.dims().to_vec();
        self.non_negative(&dims, body);
        let path_args = vec![
            Expr::Addr {
                buf: path.buf,
                index: std::boxed::Box::new(path.offset.clone()),
            },
            path.strides[0].clone(),
            path.dims[0].clone(),
            product(&dims),
        ];
        // The file checked before its floats are given room.
        body.push(Stmt::Call {
            func: "rt_check_f32bin",
            args: path_args.clone(),
        });
        let dest = self.alloc("floats", Elem::Float, dims.clone(), body);
        let mut args = path_args;
        args.push(Expr::Addr {
            buf: dest.buf,
            index: std::boxed::Box::new(dest.offset.clone()),
        });
        body.push(Stmt::Call {
            func: "rt_read_f32bin",
            args,
        });
        Ok(cell_val(dest))
    }
}

/// The text of a vector of code points written in the program.
pub(super) fn literal_text(e: &maps::Expr) -> Option<String> {
    let Kind::Array { shape, atoms } = &e.kind else {
        return None;
    };
    if shape.len() != 1 {
        return None;
    }
    atoms
        .iter()
        .map(|a| match a {
            Atom::Int(c) => u32::try_from(*c).ok().and_then(char::from_u32),
            _ => None,
        })
        .collect()
}
