//! Prints a parsed name as binutils' demangler (`cp-demangle.c`,
//! `d_print_comp` and friends) does, byte for byte: declarator order through
//! a stack of pending modifiers (`int (*)(char)`, `int (&) [3]`), template
//! parameters resolved against the enclosing template at print time, pack
//! expansions, `> >`, literal suffixes (`16807ul`, `(char)97`, `true`).
//!
//! The modifier and template stacks are arenas of linked entries (indices,
//! never pointers). Recursion depth, work and output length are bounded;
//! past a bound, or on a reference that does not resolve, printing fails.

use super::ast::{Id, LitStyle, Node, Qual};

/// binutils' `MAX_RECURSION_COUNT`: deeper printing is an error.
const MAX_RECURSION: u32 = 1024;
/// Work bound: components printed (or searched for packs) per name.
const MAX_STEPS: u32 = 1_000_000;
/// Output bound, far above any real name.
const MAX_OUTPUT: usize = 1 << 20;

/// The printed name of `root`, or `None` where binutils' printer fails.
pub(super) fn print(nodes: &[Node<'_>], root: Id) -> Option<Vec<u8>> {
    let mut p = Printer {
        nodes,
        out: Vec::new(),
        last: 0,
        failed: false,
        templates: None,
        tpls: Vec::new(),
        mods: None,
        modv: Vec::new(),
        depth: 0,
        is_lambda_arg: 0,
        pack_index: 0,
        stack: Vec::new(),
        printing: vec![0; nodes.len()],
        scopes: Vec::new(),
        current_template: None,
        steps: 0,
    };
    p.comp(Some(root));
    (!p.failed).then_some(p.out)
}

/// A pending modifier (pointer, qualifier, function or array type, or a
/// function's name) waiting to be printed in its declarator position.
#[derive(Clone, Copy)]
struct Mod {
    node: Id,
    printed: bool,
    /// The templates in scope where it was pushed.
    templates: Option<usize>,
    next: Option<usize>,
}

struct Printer<'n, 'a> {
    nodes: &'n [Node<'a>],
    out: Vec<u8>,
    /// Last byte appended; binutils keeps it even when it takes back `, `.
    last: u8,
    failed: bool,
    /// Head of the template stack (index into `tpls`).
    templates: Option<usize>,
    /// Template stack entries: the template node and the next entry.
    tpls: Vec<(Id, Option<usize>)>,
    /// Head of the modifier stack (index into `modv`).
    mods: Option<usize>,
    modv: Vec<Mod>,
    depth: u32,
    is_lambda_arg: u32,
    /// Which element of a pack a template parameter stands for (-1: all).
    pack_index: i32,
    /// Components being printed, outermost first.
    stack: Vec<Id>,
    /// How often each component is on `stack`.
    printing: Vec<u8>,
    /// Template scopes captured for template parameters under references.
    scopes: Vec<(Id, Option<usize>)>,
    current_template: Option<Id>,
    steps: u32,
}

impl<'n, 'a> Printer<'n, 'a> {
    fn node(&self, id: Id) -> Option<&'n Node<'a>> {
        self.nodes.get(id)
    }

    fn fail(&mut self) {
        self.failed = true;
    }

    fn append(&mut self, s: &[u8]) {
        if let Some(&c) = s.last() {
            self.out.extend_from_slice(s);
            self.last = c;
        }
        if self.out.len() > MAX_OUTPUT {
            self.fail();
        }
    }

    fn append_str(&mut self, s: &str) {
        self.append(s.as_bytes());
    }

    fn append_num(&mut self, n: i64) {
        self.append_str(&n.to_string());
    }

    fn is_fnqual(&self, id: Id) -> bool {
        matches!(self.node(id), Some(Node::Qualifier(q, ..)) if q.is_fnqual())
    }

    fn push_mod(&mut self, node: Id) -> usize {
        self.modv.push(Mod {
            node,
            printed: false,
            templates: self.templates,
            next: self.mods,
        });
        let m = self.modv.len() - 1;
        self.mods = Some(m);
        m
    }

    fn printed(&self, m: usize) -> bool {
        self.modv.get(m).is_some_and(|e| e.printed)
    }

    fn mod_next(&self, m: usize) -> Option<usize> {
        self.modv.get(m).and_then(|e| e.next)
    }

    fn push_template(&mut self, decl: Id) {
        self.tpls.push((decl, self.templates));
        self.templates = Some(self.tpls.len() - 1);
    }

    /// Prints one component (binutils' `d_print_comp`), refusing cycles
    /// through substitutions and too deep or too long a print.
    fn comp(&mut self, dc: Option<Id>) {
        let Some(id) = dc else {
            return self.fail();
        };
        let count = self.printing.get(id).copied().unwrap_or(u8::MAX);
        self.steps += 1;
        if count > 1 || self.depth > MAX_RECURSION || self.steps > MAX_STEPS {
            return self.fail();
        }
        if let Some(c) = self.printing.get_mut(id) {
            *c += 1;
        }
        self.depth += 1;
        self.stack.push(id);
        if !self.failed {
            self.comp_inner(id);
        }
        self.stack.pop();
        self.depth -= 1;
        if let Some(c) = self.printing.get_mut(id) {
            *c -= 1;
        }
    }

    fn comp_inner(&mut self, id: Id) {
        let Some(node) = self.node(id) else {
            return self.fail();
        };
        match *node {
            Node::Name(s) => self.append(s),
            Node::SubStd(s) => self.append_str(s),
            Node::Builtin(b) => self.append_str(b.name),
            Node::FloatN(bits, x) => {
                self.append_str("_Float");
                self.append_num(bits.into());
                if x {
                    self.append_str("x");
                }
            }
            Node::Tagged(name, tag) => {
                self.comp(Some(name));
                self.append_str("[abi:");
                self.comp(Some(tag));
                self.append_str("]");
            }
            Node::Qual(scope, name) | Node::Local(scope, name) => {
                self.comp(Some(scope));
                self.append_str("::");
                self.local_entity(name);
            }
            Node::Typed(name, ty) => self.typed_name(name, ty),
            Node::Template(name, args) => self.template(id, name, args),
            Node::TemplateParam(n) => self.template_param(n),
            Node::Ctor(name) => self.comp(Some(name)),
            Node::Dtor(name) => {
                self.append_str("~");
                self.comp(Some(name));
            }
            Node::Special(text, x) => {
                self.append_str(text);
                self.comp(Some(x));
            }
            Node::ConstructionVtable(base, derived) => {
                self.append_str("construction vtable for ");
                self.comp(Some(base));
                self.append_str("-in-");
                self.comp(Some(derived));
            }
            Node::RefTemp(name, num) => {
                self.append_str("reference temporary #");
                self.comp(Some(num));
                self.append_str(" for ");
                self.comp(Some(name));
            }
            _ => self.comp_types(id, node),
        }
    }

    fn comp_types(&mut self, id: Id, node: &Node<'a>) {
        match *node {
            Node::Qualifier(q, inner, _) if q.is_cv() => self.cv_qualifier(id, q, inner),
            Node::Qualifier(_, inner, _) => self.modifier(id, inner),
            Node::Reference(sub) | Node::RvalueRef(sub) => self.reference(id, sub),
            Node::VendorTypeQual(inner, _)
            | Node::Pointer(inner)
            | Node::Complex(inner)
            | Node::Imaginary(inner) => self.modifier(id, Some(inner)),
            Node::VendorType(name) => self.comp(Some(name)),
            Node::Function(ret, params) => self.function(id, ret, params),
            Node::Array(_, elem) => self.array(id, elem),
            Node::PtrMem(_, inner) | Node::Vector(_, inner) => {
                let m = self.push_mod(id);
                self.comp(Some(inner));
                if !self.printed(m) {
                    self.print_mod(id);
                }
                self.mods = self.mod_next(m);
            }
            Node::ArgList(ref v) | Node::TemplateArgs(ref v) => self.list(v),
            Node::InitList(ty, list) => {
                if ty.is_some() {
                    self.comp(ty);
                }
                self.append_str("{");
                self.comp(Some(list));
                self.append_str("}");
            }
            _ => self.comp_expressions(node),
        }
    }

    fn comp_expressions(&mut self, node: &Node<'a>) {
        match *node {
            Node::Operator(info) => {
                self.append_str("operator");
                if info.name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    self.append_str(" ");
                }
                self.append_str(info.name.strip_suffix(' ').unwrap_or(info.name));
            }
            Node::ExtOperator(_, name) => {
                self.append_str("operator ");
                self.comp(Some(name));
            }
            Node::Conversion(ty) => {
                self.append_str("operator ");
                self.conversion(ty);
            }
            Node::Nullary(op) => self.expr_op(op),
            Node::Unary(op, operand, suffix) => self.unary(op, operand, suffix),
            Node::Binary(op, l, r) => self.binary(op, l, r),
            Node::Trinary(op, a, b, c) => self.trinary(op, a, b, c),
            Node::Literal(ty, value, negative) => self.literal(ty, value, negative),
            Node::Number(n) => self.append_num(n.into()),
            Node::Decltype(e) => {
                self.append_str("decltype (");
                self.comp(Some(e));
                self.append_str(")");
            }
            Node::PackExpansion(pattern) => self.pack_expansion(pattern),
            Node::FunctionParam(0) => self.append_str("this"),
            Node::FunctionParam(n) => {
                self.append_str("{parm#");
                self.append_num(n.into());
                self.append_str("}");
            }
            _ => self.comp_names(node),
        }
    }

    fn comp_names(&mut self, node: &Node<'a>) {
        match *node {
            Node::Lambda(params, n) => {
                self.append_str("{lambda(");
                // Generic lambdas' `auto` parameters are template parameters.
                self.is_lambda_arg += 1;
                self.comp(Some(params));
                self.is_lambda_arg -= 1;
                self.append_str(")#");
                self.append_num(i64::from(n) + 1);
                self.append_str("}");
            }
            Node::UnnamedType(n) => {
                self.append_str("{unnamed type#");
                self.append_num(i64::from(n) + 1);
                self.append_str("}");
            }
            Node::Clone(encoding, suffix) => {
                self.comp(Some(encoding));
                self.append_str(" [clone ");
                self.comp(Some(suffix));
                self.append_str("]");
            }
            Node::VendorExpr(name, args) => {
                self.comp(Some(name));
                self.append_str("(");
                self.comp(Some(args));
                self.append_str(")");
            }
            Node::StructuredBinding(list) => {
                self.append_str("[");
                self.comp(Some(list));
                self.append_str("]");
            }
            Node::Module(parent, name, partition) => {
                if parent.is_some() {
                    self.comp(parent);
                }
                if partition {
                    self.append_str(":");
                } else if parent.is_some() {
                    self.append_str(".");
                }
                self.comp(Some(name));
            }
            Node::ModuleEntity(name, module) => {
                self.comp(Some(name));
                self.append_str("@");
                self.comp(Some(module));
            }
            // Casts print only inside their expression, default arguments
            // only inside a local name.
            _ => self.fail(),
        }
    }

    /// The entity of a qualified or local name (`{default arg#N}::` first).
    fn local_entity(&mut self, name: Id) {
        if let Some(&Node::DefaultArg(n, sub)) = self.node(name) {
            self.append_str("{default arg#");
            self.append_num(i64::from(n) + 1);
            self.append_str("}::");
            self.comp(Some(sub));
        } else {
            self.comp(Some(name));
        }
    }

    /// A function name with its type: the name and the qualifiers of
    /// `this` go down as modifiers, so the type prints them in place.
    fn typed_name(&mut self, name: Id, ty: Id) {
        let hold_mods = self.mods;
        self.mods = None;
        let mut pushed: Vec<usize> = Vec::new();
        let mut typed = Some(name);
        while let Some(t) = typed {
            if pushed.len() >= 4 {
                return self.fail();
            }
            pushed.push(self.push_mod(t));
            if !self.is_fnqual(t) {
                break;
            }
            typed = self.qualifier_inner(t);
        }
        let Some(mut t) = typed else {
            return self.fail();
        };
        if let Some(&Node::Local(_, entity)) = self.node(t) {
            match self.local_qualifiers(entity, &mut pushed) {
                Some(e) => t = e,
                None => return self.fail(),
            }
        }
        let hold_templates = self.templates;
        if matches!(self.node(t), Some(Node::Template(..))) {
            self.push_template(t);
        }
        self.comp(Some(ty));
        self.templates = hold_templates;
        for &m in pushed.iter().rev() {
            if !self.printed(m) {
                self.append_str(" ");
                if let Some(node) = self.modv.get(m).map(|e| e.node) {
                    self.print_mod(node);
                }
            }
        }
        self.mods = hold_mods;
    }

    /// A class local to a function carries the function's `this`
    /// qualifiers on its entity: they go under the local name's entry.
    fn local_qualifiers(&mut self, entity: Id, pushed: &mut Vec<usize>) -> Option<Id> {
        let mut t = entity;
        if let Some(&Node::DefaultArg(_, sub)) = self.node(t) {
            t = sub;
        }
        while self.is_fnqual(t) {
            if pushed.len() >= 4 {
                return None;
            }
            let top = *pushed.last()?;
            let mut copy = *self.modv.get(top)?;
            copy.next = Some(top);
            let templates = self.templates;
            let slot = self.modv.get_mut(top)?;
            *slot = Mod {
                node: t,
                printed: false,
                templates,
                next: slot.next,
            };
            self.modv.push(copy);
            self.mods = Some(self.modv.len() - 1);
            pushed.push(self.modv.len() - 1);
            t = self.qualifier_inner(t)?;
        }
        Some(t)
    }

    fn qualifier_inner(&self, id: Id) -> Option<Id> {
        match self.node(id) {
            Some(&Node::Qualifier(_, inner, _)) => inner,
            _ => None,
        }
    }

    fn template(&mut self, id: Id, name: Id, args: Id) {
        let hold_current = self.current_template.replace(id);
        // Modifiers outside do not belong inside the argument list.
        let hold_mods = self.mods.take();
        self.comp(Some(name));
        self.template_args(args);
        self.mods = hold_mods;
        self.current_template = hold_current;
    }

    /// `<args>`, with a space to avoid `<<` and `>>`.
    fn template_args(&mut self, args: Id) {
        if self.last == b'<' {
            self.append_str(" ");
        }
        self.append_str("<");
        self.comp(Some(args));
        if self.last == b'>' {
            self.append_str(" ");
        }
        self.append_str(">");
    }

    fn template_param(&mut self, n: i32) {
        if self.is_lambda_arg > 0 {
            self.append_str("auto:");
            self.append_num(i64::from(n) + 1);
            return;
        }
        let Some(a) = self.lookup_template_argument(n) else {
            return self.fail();
        };
        // The argument may itself name an outer template's parameter.
        let hold = self.templates;
        self.templates = hold.and_then(|t| self.tpls.get(t)).and_then(|e| e.1);
        self.comp(Some(a));
        self.templates = hold;
    }

    /// The argument for parameter `n` of the innermost template in scope
    /// (the current element of a pack).
    fn lookup_template_argument(&mut self, n: i32) -> Option<Id> {
        let a = self.template_argument(n)?;
        if matches!(self.node(a), Some(Node::TemplateArgs(_))) {
            return self.index_template_argument(a, self.pack_index);
        }
        Some(a)
    }

    /// Parameter `n`'s argument, a whole pack if it is one; no template in
    /// scope is an error.
    fn template_argument(&mut self, n: i32) -> Option<Id> {
        let Some(t) = self.templates else {
            self.fail();
            return None;
        };
        let (decl, _) = *self.tpls.get(t)?;
        match self.node(decl) {
            Some(&Node::Template(_, args)) => self.index_template_argument(args, n),
            _ => None,
        }
    }

    fn index_template_argument(&self, args: Id, i: i32) -> Option<Id> {
        let Ok(i) = usize::try_from(i) else {
            return Some(args);
        };
        match self.node(args) {
            Some(Node::TemplateArgs(v)) => v.get(i).copied(),
            _ => None,
        }
    }

    /// A qualifier pushed twice (an array passes its element's cv down)
    /// prints once.
    fn cv_qualifier(&mut self, id: Id, q: Qual, inner: Option<Id>) {
        let mut p = self.mods;
        while let Some(m) = p {
            let Some(e) = self.modv.get(m).copied() else {
                break;
            };
            if !e.printed {
                match self.node(e.node) {
                    Some(&Node::Qualifier(pq, ..)) if pq.is_cv() => {
                        if pq == q {
                            return self.comp(inner);
                        }
                    }
                    _ => break,
                }
            }
            p = e.next;
        }
        self.modifier(id, inner);
    }

    /// Prints `inner` with `id` pending, then `id` if nothing took it.
    fn modifier(&mut self, id: Id, inner: Option<Id>) {
        let m = self.push_mod(id);
        self.comp(inner);
        if !self.printed(m) {
            self.print_mod(id);
        }
        self.mods = self.mod_next(m);
    }

    /// `&` / `&&`, collapsing references through template parameters
    /// (`T&&` with `T = int&` is `int&`).
    fn reference(&mut self, id: Id, sub: Id) {
        let mut sub = sub;
        let mut restore = None;
        if self.is_lambda_arg == 0 {
            if let Some(&Node::TemplateParam(n)) = self.node(sub) {
                restore = self.enter_saved_scope(id, sub);
                let Some(a) = self.lookup_template_argument(n) else {
                    if let Some(t) = restore {
                        self.templates = t;
                    }
                    return self.fail();
                };
                sub = a;
            }
        }
        let (dc, inner) = match self.node(sub) {
            Some(&Node::Reference(x)) => (sub, x),
            Some(&Node::RvalueRef(x)) if self.same_kind(sub, id) => (sub, x),
            Some(&Node::RvalueRef(x)) => (id, x),
            _ => (id, sub),
        };
        let m = self.push_mod(dc);
        self.comp(Some(inner));
        if !self.printed(m) {
            self.print_mod(dc);
        }
        self.mods = self.mod_next(m);
        if let Some(t) = restore {
            self.templates = t;
        }
    }

    fn same_kind(&self, a: Id, b: Id) -> bool {
        matches!(
            (self.node(a), self.node(b)),
            (Some(Node::RvalueRef(_)), Some(Node::RvalueRef(_)))
                | (Some(Node::Reference(_)), Some(Node::Reference(_)))
        )
    }

    /// A template parameter under a reference is resolved in the scope
    /// where it was first printed, when reached again through a
    /// substitution elsewhere; returns the templates to restore.
    fn enter_saved_scope(&mut self, dc: Id, sub: Id) -> Option<Option<usize>> {
        let Some(&(_, saved)) = self.scopes.iter().find(|s| s.0 == sub) else {
            self.scopes.push((sub, self.templates));
            return None;
        };
        let top = self.stack.len().saturating_sub(1);
        let beneath = self
            .stack
            .iter()
            .enumerate()
            .any(|(k, &c)| c == sub || (c == dc && k != top));
        if beneath {
            return None;
        }
        let hold = self.templates;
        self.templates = saved;
        Some(hold)
    }

    /// A function type: the return type with the function pending, then the
    /// declarator and parameters.
    fn function(&mut self, id: Id, ret: Option<Id>, params: Option<Id>) {
        if let Some(ret) = ret {
            let m = self.push_mod(id);
            self.comp(Some(ret));
            self.mods = self.mod_next(m);
            if self.printed(m) {
                return;
            }
            self.append_str(" ");
        }
        self.function_type(params, self.mods);
    }

    /// `(declarator)(params) qualifiers` for the pending modifiers `mods`.
    fn function_type(&mut self, params: Option<Id>, mods: Option<usize>) {
        let (need_paren, mut need_space) = self.function_parens(mods);
        if need_paren {
            if !need_space && self.last != b'(' && self.last != b'*' {
                need_space = true;
            }
            if need_space && self.last != b' ' {
                self.append_str(" ");
            }
            self.append_str("(");
        }
        let hold = self.mods.take();
        self.print_mod_list(mods, false);
        if need_paren {
            self.append_str(")");
        }
        self.append_str("(");
        if params.is_some() {
            self.comp(params);
        }
        self.append_str(")");
        self.print_mod_list(mods, true);
        self.mods = hold;
    }

    fn function_parens(&self, mods: Option<usize>) -> (bool, bool) {
        let mut p = mods;
        while let Some(e) = p.and_then(|m| self.modv.get(m)) {
            if e.printed {
                break;
            }
            match self.node(e.node) {
                Some(Node::Pointer(_) | Node::Reference(_) | Node::RvalueRef(_)) => {
                    return (true, false);
                }
                Some(Node::Qualifier(q, ..)) if q.is_cv() => return (true, true),
                Some(
                    Node::VendorTypeQual(..)
                    | Node::Complex(_)
                    | Node::Imaginary(_)
                    | Node::PtrMem(..),
                ) => return (true, true),
                _ => {}
            }
            p = e.next;
        }
        (false, false)
    }

    /// Prints the pending modifiers from `mods` on; the `this` qualifiers
    /// only when `suffix` (after the parameters).
    fn print_mod_list(&mut self, mods: Option<usize>, suffix: bool) {
        let mut cur = mods;
        while let Some(m) = cur {
            let Some(e) = self.modv.get(m).copied() else {
                return;
            };
            if self.failed {
                return;
            }
            if e.printed || (!suffix && self.is_fnqual(e.node)) {
                cur = e.next;
                continue;
            }
            if let Some(slot) = self.modv.get_mut(m) {
                slot.printed = true;
            }
            let hold = self.templates;
            self.templates = e.templates;
            let done = self.print_mod_entry(e);
            self.templates = hold;
            if done {
                return;
            }
            cur = e.next;
        }
    }

    /// Prints one modifier of a list; true when it printed the rest too.
    fn print_mod_entry(&mut self, e: Mod) -> bool {
        match self.node(e.node) {
            Some(&Node::Function(_, params)) => {
                self.function_type(params, e.next);
                true
            }
            Some(&Node::Array(dim, _)) => {
                self.array_type(dim, e.next);
                true
            }
            Some(&Node::Local(function, entity)) => {
                let hold = self.mods.take();
                self.comp(Some(function));
                self.mods = hold;
                self.append_str("::");
                let mut dc = entity;
                if let Some(&Node::DefaultArg(n, sub)) = self.node(dc) {
                    self.append_str("{default arg#");
                    self.append_num(i64::from(n) + 1);
                    self.append_str("}::");
                    dc = sub;
                }
                while self.is_fnqual(dc) {
                    match self.qualifier_inner(dc) {
                        Some(i) => dc = i,
                        None => break,
                    }
                }
                self.comp(Some(dc));
                true
            }
            _ => {
                self.print_mod(e.node);
                false
            }
        }
    }

    /// Prints one modifier in its place (binutils' `d_print_mod`).
    fn print_mod(&mut self, id: Id) {
        let Some(node) = self.node(id) else {
            return self.fail();
        };
        match *node {
            Node::Qualifier(q, _, extra) => self.print_qualifier(q, extra),
            Node::VendorTypeQual(_, name) => {
                self.append_str(" ");
                self.comp(Some(name));
            }
            Node::Pointer(_) => self.append_str("*"),
            Node::Reference(_) => self.append_str("&"),
            Node::RvalueRef(_) => self.append_str("&&"),
            Node::Complex(_) => self.append_str(" _Complex"),
            Node::Imaginary(_) => self.append_str(" _Imaginary"),
            Node::PtrMem(class, _) => {
                if self.last != b'(' {
                    self.append_str(" ");
                }
                self.comp(Some(class));
                self.append_str("::*");
            }
            Node::Typed(name, _) => self.comp(Some(name)),
            Node::Vector(dim, _) => {
                self.append_str(" __vector(");
                self.comp(Some(dim));
                self.append_str(")");
            }
            _ => self.comp(Some(id)),
        }
    }

    fn print_qualifier(&mut self, q: Qual, extra: Option<Id>) {
        let text = match q {
            Qual::Restrict | Qual::RestrictThis => " restrict",
            Qual::Volatile | Qual::VolatileThis => " volatile",
            Qual::Const | Qual::ConstThis => " const",
            Qual::TransactionSafe => " transaction_safe",
            Qual::Noexcept => " noexcept",
            Qual::ThrowSpec => " throw",
            Qual::RefThis => " &",
            Qual::RvalueRefThis => " &&",
        };
        self.append_str(text);
        if matches!(q, Qual::Noexcept | Qual::ThrowSpec) && extra.is_some() {
            self.append_str("(");
            self.comp(extra);
            self.append_str(")");
        }
    }

    /// An array: the element type with the array (and the cv-qualifiers
    /// pending on it, which apply to the element) pending.
    fn array(&mut self, id: Id, elem: Id) {
        let hold = self.mods;
        let first = self.push_mod(id);
        let mut copies = vec![first];
        let mut p = hold;
        while let Some(e) = p.and_then(|m| self.modv.get(m)).copied() {
            if !matches!(self.node(e.node), Some(Node::Qualifier(q, ..)) if q.is_cv()) {
                break;
            }
            if !e.printed {
                if copies.len() >= 4 {
                    return self.fail();
                }
                if let Some(slot) = p.and_then(|m| self.modv.get_mut(m)) {
                    slot.printed = true;
                }
                let copy = self.push_mod(e.node);
                if let Some(c) = self.modv.get_mut(copy) {
                    c.templates = e.templates;
                }
                copies.push(copy);
            }
            p = e.next;
        }
        self.comp(Some(elem));
        self.mods = hold;
        if self.printed(first) {
            return;
        }
        for &c in copies.iter().skip(1).rev() {
            if let Some(node) = self.modv.get(c).map(|e| e.node) {
                self.print_mod(node);
            }
        }
        let dim = match self.node(id) {
            Some(&Node::Array(dim, _)) => dim,
            _ => None,
        };
        self.array_type(dim, self.mods);
    }

    /// ` (declarator) [dim]` for the pending modifiers `mods`.
    fn array_type(&mut self, dim: Option<Id>, mods: Option<usize>) {
        let mut need_space = true;
        if mods.is_some() {
            let mut need_paren = false;
            let mut p = mods;
            while let Some(e) = p.and_then(|m| self.modv.get(m)) {
                if !e.printed {
                    if matches!(self.node(e.node), Some(Node::Array(..))) {
                        need_space = false;
                    } else {
                        need_paren = true;
                    }
                    break;
                }
                p = e.next;
            }
            if need_paren {
                self.append_str(" (");
            }
            self.print_mod_list(mods, false);
            if need_paren {
                self.append_str(")");
            }
        }
        if need_space {
            self.append_str(" ");
        }
        self.append_str("[");
        if dim.is_some() {
            self.comp(dim);
        }
        self.append_str("]");
    }

    /// Elements joined by `, `; binutils takes back the separators before
    /// trailing elements that print nothing (empty packs), but not its
    /// memory of the last character.
    fn list(&mut self, items: &[Id]) {
        let base = self.depth;
        let mut keep = self.out.len();
        for (i, &item) in items.iter().enumerate() {
            if i > 0 {
                self.append_str(", ");
            }
            let before = self.out.len();
            // binutils nests one call per list cell; count as it does.
            self.depth = base + u32::try_from(i).unwrap_or(u32::MAX);
            self.comp(Some(item));
            if self.out.len() > before {
                keep = self.out.len();
            }
        }
        self.depth = base;
        self.out.truncate(keep);
    }

    fn conversion(&mut self, ty: Id) {
        // The conversion's type sees the enclosing template's parameters.
        let hold = self.templates;
        if let Some(t) = self.current_template {
            self.push_template(t);
        }
        match self.node(ty) {
            Some(&Node::Template(name, args)) => {
                self.comp(Some(name));
                self.templates = hold;
                self.template_args(args);
            }
            _ => {
                self.comp(Some(ty));
                self.templates = hold;
            }
        }
    }

    fn op_code(&self, op: Id) -> Option<&'static str> {
        match self.node(op) {
            Some(Node::Operator(info)) => Some(info.code),
            _ => None,
        }
    }

    fn expr_op(&mut self, op: Id) {
        match self.node(op) {
            Some(Node::Operator(info)) => self.append_str(info.name),
            _ => self.comp(Some(op)),
        }
    }

    /// An operand, in parentheses unless it is a plain name.
    fn subexpr(&mut self, dc: Id) {
        let simple = matches!(
            self.node(dc),
            Some(Node::Name(_) | Node::Qual(..) | Node::InitList(..) | Node::FunctionParam(_))
        );
        if !simple {
            self.append_str("(");
        }
        self.comp(Some(dc));
        if !simple {
            self.append_str(")");
        }
    }

    fn unary(&mut self, op: Id, mut operand: Id, suffix: bool) {
        let code = self.op_code(op);
        if code == Some("ad") {
            // The address of a function: no parameter list.
            if let Some(&Node::Typed(name, ty)) = self.node(operand) {
                let qual = matches!(self.node(name), Some(Node::Qual(..)));
                if qual && matches!(self.node(ty), Some(Node::Function(..))) {
                    operand = name;
                }
            }
        }
        if suffix && code.is_some() {
            self.subexpr(operand);
            return self.expr_op(op);
        }
        match code {
            Some("sZ") => {
                let pack = self.find_pack(Some(operand));
                let len = self.pack_length(pack);
                return self.append_num(len as i64);
            }
            Some("sP") => {
                let len = self.args_length(operand);
                return self.append_num(len as i64);
            }
            _ => {}
        }
        match self.node(op) {
            Some(&Node::Cast(ty)) => {
                self.append_str("(");
                self.comp(Some(ty));
                self.append_str(")");
            }
            _ => self.expr_op(op),
        }
        match code {
            Some("gs") => self.comp(Some(operand)),
            Some("st") => {
                self.append_str("(");
                self.comp(Some(operand));
                self.append_str(")");
            }
            _ => self.subexpr(operand),
        }
    }

    fn binary(&mut self, op: Id, l: Id, r: Id) {
        let Some(code) = self.op_code(op) else {
            return self.fail();
        };
        if matches!(code, "sc" | "dc" | "cc" | "rc") {
            self.expr_op(op);
            self.append_str("<");
            self.comp(Some(l));
            self.append_str(">(");
            self.comp(Some(r));
            return self.append_str(")");
        }
        if code.starts_with('f') {
            return self.fold(code, l, r, None);
        }
        if matches!(code, "di" | "dx") {
            return self.designated_init(code, l, r, None);
        }
        // `a > b` in parentheses, so its `>` does not end a template.
        let gt = code == "gt";
        if gt {
            self.append_str("(");
        }
        match self.node(l) {
            Some(&Node::Typed(name, ty)) if code == "cl" => {
                // A call prints its arguments' values, not their types.
                if !matches!(self.node(ty), Some(Node::Function(..))) {
                    self.fail();
                }
                self.subexpr(name);
            }
            _ => self.subexpr(l),
        }
        if code == "ix" {
            self.append_str("[");
            self.comp(Some(r));
            self.append_str("]");
        } else {
            if code != "cl" {
                self.expr_op(op);
            }
            self.subexpr(r);
        }
        if gt {
            self.append_str(")");
        }
    }

    fn trinary(&mut self, op: Id, first: Id, second: Id, third: Option<Id>) {
        let Some(code) = self.op_code(op) else {
            return self.fail();
        };
        if code.starts_with('f') {
            return self.fold(code, first, second, third);
        }
        if code == "dX" {
            return self.designated_init(code, first, second, third);
        }
        if code == "qu" {
            self.subexpr(first);
            self.expr_op(op);
            self.subexpr(second);
            self.append_str(" : ");
            return match third {
                Some(t) => self.subexpr(t),
                None => self.fail(),
            };
        }
        self.append_str("new ");
        if matches!(self.node(first), Some(Node::ArgList(v)) if !v.is_empty()) {
            self.subexpr(first);
            self.append_str(" ");
        }
        self.comp(Some(second));
        if let Some(t) = third {
            self.subexpr(t);
        }
    }

    /// C++17 fold expressions, the whole pack: `(... + x)`, `(x + ...)`,
    /// `(x + ... + y)`.
    fn fold(&mut self, code: &str, operator: Id, op1: Id, op2: Option<Id>) {
        let save = self.pack_index;
        self.pack_index = -1;
        match code.as_bytes().get(1) {
            Some(b'l') => {
                self.append_str("(...");
                self.expr_op(operator);
                self.subexpr(op1);
                self.append_str(")");
            }
            Some(b'r') => {
                self.append_str("(");
                self.subexpr(op1);
                self.expr_op(operator);
                self.append_str("...)");
            }
            _ => {
                self.append_str("(");
                self.subexpr(op1);
                self.expr_op(operator);
                self.append_str("...");
                self.expr_op(operator);
                match op2 {
                    Some(o) => self.subexpr(o),
                    None => self.fail(),
                }
                self.append_str(")");
            }
        }
        self.pack_index = save;
    }

    fn is_designated_init(&self, dc: Id) -> bool {
        let op = match self.node(dc) {
            Some(&Node::Binary(op, ..) | &Node::Trinary(op, ..)) => op,
            _ => return false,
        };
        matches!(self.op_code(op), Some("di" | "dx" | "dX"))
    }

    /// `.name=value`, `[index]=value`, `[a ... b]=value`.
    fn designated_init(&mut self, code: &str, op1: Id, second: Id, third: Option<Id>) {
        let field = code == "di";
        self.append_str(if field { "." } else { "[" });
        self.comp(Some(op1));
        let mut value = Some(second);
        if code == "dX" {
            self.append_str(" ... ");
            self.comp(Some(second));
            value = third;
        }
        if !field {
            self.append_str("]");
        }
        let Some(value) = value else {
            return self.fail();
        };
        if self.is_designated_init(value) {
            self.comp(Some(value));
        } else {
            self.append_str("=");
            self.subexpr(value);
        }
    }

    fn literal(&mut self, ty: Id, value: Id, negative: bool) {
        let style = match self.node(ty) {
            Some(Node::Builtin(b)) => b.style,
            _ => LitStyle::Default,
        };
        let suffix = match style {
            LitStyle::Int => Some(""),
            LitStyle::Unsigned => Some("u"),
            LitStyle::Long => Some("l"),
            LitStyle::UnsignedLong => Some("ul"),
            LitStyle::LongLong => Some("ll"),
            LitStyle::UnsignedLongLong => Some("ull"),
            _ => None,
        };
        let digits = match self.node(value) {
            Some(Node::Name(d)) => Some(*d),
            _ => None,
        };
        if let (Some(suffix), Some(_)) = (suffix, digits) {
            if negative {
                self.append_str("-");
            }
            self.comp(Some(value));
            return self.append_str(suffix);
        }
        if style == LitStyle::Bool && !negative {
            match digits {
                Some(b"0") => return self.append_str("false"),
                Some(b"1") => return self.append_str("true"),
                _ => {}
            }
        }
        self.append_str("(");
        self.comp(Some(ty));
        self.append_str(")");
        if negative {
            self.append_str("-");
        }
        let float = style == LitStyle::Float;
        if float {
            self.append_str("[");
        }
        self.comp(Some(value));
        if float {
            self.append_str("]");
        }
    }

    /// `pattern...` expanded over the pack it uses, element by element.
    fn pack_expansion(&mut self, pattern: Id) {
        let Some(pack) = self.find_pack(Some(pattern)) else {
            // Only function parameter packs: print the pattern and `...`.
            self.subexpr(pattern);
            return self.append_str("...");
        };
        let len = self.pack_length(Some(pack));
        for i in 0..len {
            // binutils leaves the index at the last element afterwards.
            self.pack_index = i32::try_from(i).unwrap_or(i32::MAX);
            self.comp(Some(pattern));
            if i + 1 < len {
                self.append_str(", ");
            }
        }
    }

    /// A template argument pack that `dc` uses, if any (binutils'
    /// `d_find_pack`, which searches left to right).
    fn find_pack(&mut self, dc: Option<Id>) -> Option<Id> {
        let node = self.node(dc?)?;
        self.steps += 1;
        if self.steps > MAX_STEPS {
            self.fail();
            return None;
        }
        match *node {
            // In a lambda's parameters a template parameter is `auto`.
            Node::TemplateParam(_) if self.is_lambda_arg > 0 => None,
            Node::TemplateParam(n) => {
                let a = self.template_argument(n)?;
                matches!(self.node(a), Some(Node::TemplateArgs(_))).then_some(a)
            }
            Node::PackExpansion(_)
            | Node::Lambda(..)
            | Node::Name(_)
            | Node::Tagged(..)
            | Node::Operator(_)
            | Node::Builtin(_)
            | Node::FloatN(..)
            | Node::SubStd(_)
            | Node::FunctionParam(_)
            | Node::UnnamedType(_)
            | Node::DefaultArg(..)
            | Node::Number(_) => None,
            Node::ExtOperator(_, name) | Node::Ctor(name) | Node::Dtor(name) => {
                self.find_pack(Some(name))
            }
            Node::ArgList(ref v) | Node::TemplateArgs(ref v) => {
                v.iter().find_map(|&e| self.find_pack(Some(e)))
            }
            _ => children(node).into_iter().find_map(|c| self.find_pack(c)),
        }
    }

    fn pack_length(&self, pack: Option<Id>) -> usize {
        match pack.and_then(|p| self.node(p)) {
            Some(Node::TemplateArgs(v)) => v.len(),
            _ => 0,
        }
    }

    /// The number of arguments in `args`, packs expanded (`sizeof...`).
    fn args_length(&mut self, args: Id) -> usize {
        let Some(Node::TemplateArgs(v)) = self.node(args) else {
            return 0;
        };
        let mut count = 0;
        for &e in v {
            if let Some(&Node::PackExpansion(p)) = self.node(e) {
                let pack = self.find_pack(Some(p));
                count += self.pack_length(pack);
            } else {
                count += 1;
            }
        }
        count
    }
}

/// The sub-components of `node` in binutils' left-then-right order, for
/// the pack search.
fn children(node: &Node<'_>) -> [Option<Id>; 4] {
    match *node {
        Node::Qual(a, b)
        | Node::Local(a, b)
        | Node::Typed(a, b)
        | Node::Template(a, b)
        | Node::ConstructionVtable(a, b)
        | Node::RefTemp(a, b)
        | Node::VendorTypeQual(a, b)
        | Node::PtrMem(a, b)
        | Node::Vector(a, b)
        | Node::Literal(a, b, _)
        | Node::Clone(a, b)
        | Node::VendorExpr(a, b)
        | Node::ModuleEntity(a, b)
        | Node::Unary(a, b, _) => [Some(a), Some(b), None, None],
        Node::Module(a, b, _) => [a, Some(b), None, None],
        Node::Special(_, a)
        | Node::Pointer(a)
        | Node::Reference(a)
        | Node::RvalueRef(a)
        | Node::Complex(a)
        | Node::Imaginary(a)
        | Node::VendorType(a)
        | Node::Cast(a)
        | Node::Conversion(a)
        | Node::Nullary(a)
        | Node::Decltype(a)
        | Node::StructuredBinding(a) => [Some(a), None, None, None],
        Node::Qualifier(_, a, b) | Node::Function(a, b) => [a, b, None, None],
        Node::Array(a, b) | Node::InitList(a, b) => [a, Some(b), None, None],
        Node::Binary(op, a, b) => [Some(op), Some(a), Some(b), None],
        Node::Trinary(op, a, b, c) => [Some(op), Some(a), Some(b), c],
        _ => [None; 4],
    }
}
