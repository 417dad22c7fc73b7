//! Itanium C++ ABI demangling (the ABI's §5.1 "External Names", kept in
//! the Itanium C++ ABI document) that prints exactly what GNU binutils
//! prints: gprof and `c++filt` demangle through libiberty's
//! `cp-demangle.c`, and profconv's names must match theirs byte for byte
//! (`16807ul`, `(char)97`, `{lambda(auto:1&)#1}`, `> >`, `[clone .cold]`,
//! `std::string` for `Ss` as gprof and `nm -C` print it, or
//! `std::basic_string<char, std::char_traits<char>, std::allocator<char> >`
//! as `c++filt`'s verbose default spells it).
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

/// The name binutils' demangler gives `mangled` (an Itanium C++ `_Z...`
/// symbol) as gprof, `nm -C`, gdb and `c++filt -i` print it, or None where
/// it cannot demangle it all (then callers keep the mangled name: never a
/// part of a name).
///
/// These are binutils' flags without `DMGL_VERBOSE`: the standard
/// abbreviations print short (`std::string` for `Ss`, `std::ostream` for
/// `So`), parameter lists and clone suffixes (`foo() [clone .constprop.0]`)
/// are printed.
pub fn demangle_cpp(mangled: &str) -> Option<String> {
    demangle_with(mangled, false)
}

/// [`demangle_cpp`] with binutils' `DMGL_VERBOSE`, as `c++filt` prints by
/// default: `Ss` spelled out as `std::basic_string<char,
/// std::char_traits<char>, std::allocator<char> >`.
pub fn demangle_cpp_verbose(mangled: &str) -> Option<String> {
    demangle_with(mangled, true)
}

fn demangle_with(mangled: &str, verbose: bool) -> Option<String> {
    if let Some((what, keyed)) = global_ctor_dtor(mangled) {
        // binutils' `DCT_GLOBAL_CTORS`/`DTORS`: what follows is demangled
        // when it is a `_Z` name, and printed as it is otherwise.
        let keyed = match keyed.starts_with("_Z") {
            true => demangle_with(keyed, verbose)?,
            false => keyed.to_owned(),
        };
        return Some(format!("global {what} keyed to {keyed}"));
    }
    let bytes = mangled.as_bytes();
    if !bytes.starts_with(b"_Z") || bytes.len() > MAX_MANGLED_LEN {
        return None;
    }
    let mut parser = parse::Parser::new(bytes, verbose);
    let root = match parser.parse() {
        Some(root) => root,
        // An `sr` read in the current syntax may have been the old one.
        None if parser.unresolved_state == -1 => {
            parser = parse::Parser::new(bytes, verbose);
            parser.unresolved_state = 0;
            parser.parse()?
        }
        None => return None,
    };
    let out = print::print(&parser.nodes, root)?;
    String::from_utf8(out).ok()
}

/// Which variant of a constructor or destructor `mangled` is, in words
/// (`base object` for `C2`/`D2`, `deleting` for `D0`...): what tells apart
/// the variants that demangle to one name. None for any other name.
pub(crate) fn structor_variant(mangled: &str) -> Option<&'static str> {
    let bytes = mangled.as_bytes();
    if !bytes.starts_with(b"_Z") || bytes.len() > MAX_MANGLED_LEN {
        return None;
    }
    let mut parser = parse::Parser::new(bytes, false);
    parser.parse()?;
    Some(match parser.structor? {
        [_, b'1'] => "complete object",
        [_, b'2'] => "base object",
        [b'C', b'3'] => "allocating",
        [b'D', b'0'] => "deleting",
        [_, b'4'] => "unified",
        [_, b'5'] => "comdat",
        _ => return None,
    })
}

/// GCC's old names of a file's static constructors and destructors,
/// `_GLOBAL_` then `.`, `_` or `$`, then `I_` or `D_`: which they are and
/// the name they are keyed to.
fn global_ctor_dtor(name: &str) -> Option<(&'static str, &str)> {
    let rest = name.strip_prefix("_GLOBAL_")?;
    let rest = rest.strip_prefix(['.', '_', '$'])?;
    let found = match rest.strip_prefix("I_") {
        Some(keyed) => ("constructors", keyed),
        None => ("destructors", rest.strip_prefix("D_")?),
    };
    (!found.1.is_empty()).then_some(found)
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
    fn standard_abbreviations_are_short_as_gprof_prints_them() {
        assert_eq!(
            d("_ZN10VectorTest2eqESsRK6Vectorfff"),
            "VectorTest::eq(std::string, Vector const&, float, float, float)"
        );
        assert_eq!(
            d("_Z1fSiSoSd"),
            "f(std::istream, std::ostream, std::iostream)"
        );
        // Before a constructor or destructor binutils spells them in full.
        assert_eq!(
            d("_ZNSdD0Ev"),
            "std::basic_iostream<char, std::char_traits<char> >::~basic_iostream()"
        );
        assert_eq!(
            d("_ZNSsC1Ev"),
            "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string()"
        );
        assert_eq!(d("_ZNKSs4sizeEv"), "std::string::size() const");
    }

    #[test]
    fn standard_abbreviations_are_spelled_in_full_as_cxxfilt_prints_them() {
        assert_eq!(
            super::demangle_cpp_verbose("_Z1fSs").as_deref(),
            Some("f(std::basic_string<char, std::char_traits<char>, std::allocator<char> >)")
        );
        assert_eq!(
            super::demangle_cpp_verbose("_ZNKSs4sizeEv").as_deref(),
            Some("std::basic_string<char, std::char_traits<char>, std::allocator<char> >::size() const")
        );
    }

    #[test]
    fn static_constructors_are_named_as_binutils_names_them() {
        assert_eq!(d("_GLOBAL__I_main"), "global constructors keyed to main");
        assert_eq!(d("_GLOBAL__D_x"), "global destructors keyed to x");
        assert_eq!(
            d("_GLOBAL__I__Z3foov"),
            "global constructors keyed to foo()"
        );
        assert_eq!(
            d("_GLOBAL__I_65535_0__Z3foov"),
            "global constructors keyed to 65535_0__Z3foov"
        );
        // GCC 4.7 and later: `_GLOBAL__sub_I_` names, which binutils keeps.
        assert_eq!(demangle_cpp("_GLOBAL__sub_I_main.cpp"), None);
        assert_eq!(demangle_cpp("_GLOBAL__I_"), None, "keyed to nothing");
    }

    #[test]
    fn constructor_and_destructor_variants_are_told_apart_in_words() {
        use super::structor_variant as v;
        assert_eq!(v("_ZN5vitis2ai13SuperPointImpD2Ev"), Some("base object"));
        assert_eq!(
            v("_ZN5vitis2ai13SuperPointImpD1Ev"),
            Some("complete object")
        );
        assert_eq!(v("_ZN5vitis2ai13SuperPointImpD0Ev"), Some("deleting"));
        assert_eq!(v("_ZN1AC1Ei"), Some("complete object"));
        assert_eq!(v("_ZN1AC2Ei"), Some("base object"));
        assert_eq!(v("_ZN1A1fEv"), None);
        assert_eq!(v("main"), None);
    }

    #[test]
    fn names_binutils_cannot_demangle_are_refused_whole() {
        // An argument pack written `I…E` (GCC 4.4 to 4.6): c++filt and gprof
        // keep it mangled, and so does profconv, never a part of it.
        let old = "_ZSt12__get_helperILm0EP4FuncISt14default_deleteIS0_EEERT0_RSt11_Tuple_implIXT_EIS4_DpT1_EE";
        assert_eq!(demangle_cpp(old), None);
        assert_eq!(super::demangle_cpp_verbose(old), None);
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
