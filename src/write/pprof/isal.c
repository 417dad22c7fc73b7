/*
 * The one call profconv makes into ISA-L's igzip (Intel's Intelligent
 * Storage Acceleration Library, Debian libisal2): a whole gzip member at
 * level 1. Compiled by build.rs when <isa-l/igzip_lib.h> (libisal-dev) is
 * there, so that the layout of `struct isal_zstream` is the installed
 * library's own; the Rust side (isal.rs) only passes buffers.
 *
 * The library is opened at run time (dlopen), not linked: loading it with
 * the program took ≈ 0.1 ms of every run's start, on the thread that then
 * parses; profconv's command line loads it on a thread of its own while
 * the command starts. Where it is missing, profconv_isal_load says so and
 * the Rust side compresses with zlib-rs.
 */
#include <dlfcn.h>
#include <isa-l/igzip_lib.h>
#include <stddef.h>
#include <stdint.h>

static void (*init_fn)(struct isal_zstream *);
static int (*deflate_fn)(struct isal_zstream *);

/*
 * Opens libisal (its ABI's name, libisal.so.2, else the development
 * link libisal.so) and finds the two functions. Returns 1 when they are
 * there. Called once, before any profconv_isal_gzip (isal.rs's OnceLock
 * orders the two).
 */
int profconv_isal_load(void)
{
    void *lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        lib = dlopen("libisal.so", RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        return 0;
    }
    init_fn = (void (*)(struct isal_zstream *))dlsym(lib, "isal_deflate_init");
    deflate_fn = (int (*)(struct isal_zstream *))dlsym(lib, "isal_deflate");
    return init_fn && deflate_fn;
}

/* The level buffer profconv_isal_gzip needs, in bytes. */
size_t profconv_isal_level_buf_len(void) { return ISAL_DEF_LVL1_DEFAULT; }

/*
 * One gzip member (RFC 1952 header and trailer) of in[0..in_len] into
 * out[0..out_cap], at level 1, with level_buf of
 * profconv_isal_level_buf_len() bytes. Returns the member's length, or 0 if
 * it did not fit in out or ISA-L failed. in_len and out_cap are below 4 GiB
 * (the Rust side checks); profconv_isal_load returned 1 before.
 */
size_t profconv_isal_gzip(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          uint8_t *level_buf, size_t level_buf_len)
{
    struct isal_zstream stream;
    init_fn(&stream);
    stream.level = 1;
    stream.level_buf = level_buf;
    stream.level_buf_size = (uint32_t)level_buf_len;
    stream.end_of_stream = 1;
    stream.flush = NO_FLUSH;
    stream.gzip_flag = IGZIP_GZIP;
    stream.next_in = (uint8_t *)in; /* read only: ISA-L never writes its input */
    stream.avail_in = (uint32_t)in_len;
    stream.next_out = out;
    stream.avail_out = (uint32_t)out_cap;
    if (deflate_fn(&stream) != COMP_OK || stream.avail_in != 0
        || stream.internal_state.state != ZSTATE_END) {
        return 0;
    }
    return stream.total_out;
}
