//! Itanium C++ ABI demangling (the ABI's §5.1 "External Names", kept in
//! the Itanium C++ ABI document) that prints exactly what GNU binutils
//! prints: gprof and `c++filt` demangle through libiberty's
//! `cp-demangle.c`, and profconv's names must match theirs byte for byte
//! (`16807ul`, `(char)97`, `{lambda(auto:1&)#1}`, `> >`, `[clone .cold]`,
//! `std::basic_string<char, std::char_traits<char>, std::allocator<char> >`
//! for `Ss`, as `c++filt`'s verbose default spells it).
//!
//! `parse.rs` reads the name into a tree, `print.rs` prints it; `ast.rs`
//! holds the tree and the tables. All of it is bounds-checked, with no
//! `unsafe`: recursion depth, work and output length are capped, so any
//! input returns (a name binutils would refuse, or too large, is `None`).
//! Names are demangled in memory, one at a time.

mod ast;
mod parse;
mod print;

/// binutils refuses names whose component table would exceed its
/// recursion limit (`2 * length > 2048`), so longer names stay mangled.
const MAX_MANGLED_LEN: usize = 1024;

/// The name binutils' demangler gives `mangled` (an Itanium C++ `_Z...` symbol),
/// or None where it cannot demangle it (then callers keep the mangled name).
///
/// The output is `c++filt`'s (binutils 2.40, default options), including
/// parameter lists and clone suffixes (`foo() [clone .constprop.0]`).
pub fn demangle_cpp(mangled: &str) -> Option<String> {
    let bytes = mangled.as_bytes();
    if !bytes.starts_with(b"_Z") || bytes.len() > MAX_MANGLED_LEN {
        return None;
    }
    let mut parser = parse::Parser::new(bytes);
    let root = match parser.parse() {
        Some(root) => root,
        // An `sr` read in the current syntax may have been the old one.
        None if parser.unresolved_state == -1 => {
            parser = parse::Parser::new(bytes);
            parser.unresolved_state = 0;
            parser.parse()?
        }
        None => return None,
    };
    let out = print::print(&parser.nodes, root)?;
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::demangle_cpp;

    fn d(m: &str) -> String {
        demangle_cpp(m).unwrap_or_else(|| format!("<none: {m}>"))
    }

    #[test]
    fn integer_literals_take_binutils_suffixes() {
        assert_eq!(d("_Z1fILm16807EEvv"), "void f<16807ul>()");
        assert_eq!(d("_Z1fILj3EEvv"), "void f<3u>()");
        assert_eq!(d("_Z1fILin5EEvv"), "void f<-5>()");
        assert_eq!(d("_Z1fILb1EEvv"), "void f<true>()");
        assert_eq!(d("_Z1fILc97EEvv"), "void f<(char)97>()");
        assert_eq!(d("_Z1fILDnEEvv"), "void f<decltype(nullptr)>()");
    }

    #[test]
    fn declarators_are_spaced_as_cxxfilt_spaces_them() {
        assert_eq!(d("_Z1fPFivE"), "f(int (*)())");
        assert_eq!(d("_Z1fRA3_i"), "f(int (&) [3])");
        assert_eq!(d("_Z1fPKc"), "f(char const*)");
        assert_eq!(d("_Z1fA3_A4_i"), "f(int [3][4])");
        assert_eq!(d("_Z1fM1AKFivE"), "f(int (A::*)() const)");
    }

    #[test]
    fn member_functions_keep_cv_and_ref_qualifiers() {
        assert_eq!(
            d("_ZNKSt6vectorIiSaIiEE4sizeEv"),
            "std::vector<int, std::allocator<int> >::size() const"
        );
        assert_eq!(d("_ZNKR1A1fEv"), "A::f() const &");
        assert_eq!(d("_ZNO1A1fEv"), "A::f() &&");
    }

    #[test]
    fn template_parameters_resolve_and_forward() {
        assert_eq!(d("_Z1fIiEvT_"), "void f<int>(int)");
        assert_eq!(d("_ZN1AIiE1fIcEEvT_"), "void A<int>::f<char>(char)");
        assert_eq!(
            d("_Z4callIRiJiEEvOT_DpOT0_"),
            "void call<int&, int>(int&, int&&)"
        );
    }

    #[test]
    fn standard_abbreviations_are_spelled_verbosely() {
        assert_eq!(
            d("_Z1fSs"),
            "f(std::basic_string<char, std::char_traits<char>, std::allocator<char> >)"
        );
        assert_eq!(
            d("_ZNSdD0Ev"),
            "std::basic_iostream<char, std::char_traits<char> >::~basic_iostream()"
        );
    }

    #[test]
    fn lambdas_unnamed_types_and_anonymous_namespaces_are_named() {
        assert_eq!(
            d("_ZZ4mainENKUlRT_E_clIiEEDaS0_"),
            "auto main::{lambda(auto:1&)#1}::operator()<int>(int&) const"
        );
        assert_eq!(d("_ZN1AUt_E"), "A::{unnamed type#1}");
        assert_eq!(d("_ZN12_GLOBAL__N_11fEv"), "(anonymous namespace)::f()");
    }

    #[test]
    fn special_names_are_spelled_out() {
        assert_eq!(d("_ZTV1A"), "vtable for A");
        assert_eq!(d("_ZTI1A"), "typeinfo for A");
        assert_eq!(d("_ZTS1A"), "typeinfo name for A");
        assert_eq!(d("_ZThn8_N1B1fEv"), "non-virtual thunk to B::f()");
        assert_eq!(d("_ZTv0_n24_N1B1fEv"), "virtual thunk to B::f()");
        assert_eq!(d("_ZGVZ1fvE1x"), "guard variable for f()::x");
        assert_eq!(d("_ZTW3tls"), "TLS wrapper function for tls");
    }

    #[test]
    fn clone_suffixes_follow_in_brackets() {
        assert_eq!(d("_Z3foov.constprop.0"), "foo() [clone .constprop.0]");
        assert_eq!(
            d("_Z1fv.constprop.0.isra.0"),
            "f() [clone .constprop.0] [clone .isra.0]"
        );
        assert_eq!(d("_Z1fv.part.0.cold"), "f() [clone .part.0] [clone .cold]");
    }

    #[test]
    fn abi_tags_and_extended_types_print() {
        assert_eq!(d("_Z1fB5cxx11v"), "f[abi:cxx11]()");
        assert_eq!(d("_Z1fDF16_"), "f(_Float16)");
        assert_eq!(
            d("_Z1fDnDaDc"),
            "f(decltype(nullptr), auto, decltype(auto))"
        );
        assert_eq!(d("_Z1fDv4_f"), "f(float __vector(4))");
    }

    #[test]
    fn unresolved_names_in_return_types_print() {
        assert_eq!(
            d("_Z1fIiENSt9enable_ifIXsrSt11is_integralIT_E5valueEvE4typeES2_"),
            "std::enable_if<std::is_integral<int>::value, void>::type f<int>(int)"
        );
    }

    #[test]
    fn empty_trailing_packs_leave_no_separator() {
        assert_eq!(d("_Z1fI1AIiEJEEvv"), "void f<A<int>>()");
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "",
            "_Z",
            "_Z1",
            "_Z3fo",
            "_ZN1AE1",
            "main",
            "_Z1fIT_Ev",
            "_Z1fS_",
        ] {
            assert_eq!(demangle_cpp(bad), None, "{bad}");
        }
        assert_eq!(demangle_cpp(&format!("_Z{}v", "P".repeat(2000))), None);
    }
}
