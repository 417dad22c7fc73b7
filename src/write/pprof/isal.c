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
 *
 * igzip's level-1 members depend on where the stream structure lies: the
 * same piece compressed with the structure at another address comes out
 * (now and then) as another member, equally valid. Measured with libisal2
 * 2.30 called from C: 27 of 4 096 places 1 MiB apart, the same ones every
 * run; the input, output and level buffers' places change nothing. On a
 * thread's stack the place changed with every process (ASLR) and thread,
 * so outputs did too. The streams therefore lie at fixed places, mapped
 * once (10.5 MiB of address space, a page of each used): a member made
 * with slot n is the same bytes in every run.
 */
#include <dlfcn.h>
#include <isa-l/igzip_lib.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#if defined(__linux__) && !defined(MAP_FIXED_NOREPLACE)
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older headers lack it */
#endif

static void (*init_fn)(struct isal_zstream *);
static int (*deflate_fn)(struct isal_zstream *);

/*
 * PROFCONV_ISAL_SLOTS streams, each SLOT_BYTES apart from SLOTS_AT: far
 * from where Linux puts programs (0x400000, 0x55..), their heaps and
 * mappings (0x7f..) and stacks (0x7ff..). NULL when the place was taken
 * (or the kernel, before 4.17, does not know MAP_FIXED_NOREPLACE): then
 * each stream lies on its caller's stack, as before.
 */
#define PROFCONV_ISAL_SLOTS 128
#define PREFAULTED_SLOTS 16
#define SLOTS_AT ((uintptr_t)0x2a5100000000ULL)
#define SLOT_BYTES (((sizeof(struct isal_zstream) + 4095) / 4096) * 4096)
static unsigned char *slots;

/* Maps the slots at their place. */
static void map_slots(void)
{
    /* Without MAP_FIXED_NOREPLACE there is no way to ask for a place
     * without taking another mapping's: the streams stay on the stack. */
#ifdef MAP_FIXED_NOREPLACE
    size_t len = PROFCONV_ISAL_SLOTS * SLOT_BYTES;
    void *at = mmap((void *)SLOTS_AT, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (at == MAP_FAILED) {
        return;
    }
    if ((uintptr_t)at != SLOTS_AT) {
        munmap(at, len); /* an old kernel took the place as a hint */
        return;
    }
    slots = at;
    /* A level-1 stream touches only its first page (the state before its
     * history buffer): those of the slots most outputs use are faulted in
     * here, on the spare thread, rather than by the threads compressing
     * the output at its end. */
    for (size_t n = 0; n < PREFAULTED_SLOTS; n++) {
        ((volatile unsigned char *)slots)[n * SLOT_BYTES] = 0;
    }
#endif
}

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
    if (!init_fn || !deflate_fn) {
        return 0;
    }
    map_slots();
    return 1;
}

/* How many slots there are (the Rust side keeps one lock each). */
size_t profconv_isal_slots(void) { return PROFCONV_ISAL_SLOTS; }

/* Where slot n's stream lies, 0 when the slots are not mapped. */
uintptr_t profconv_isal_slot_address(size_t n)
{
    return slots && n < PROFCONV_ISAL_SLOTS ? (uintptr_t)(slots + n * SLOT_BYTES) : 0;
}

/* The level buffer profconv_isal_gzip needs, in bytes. */
size_t profconv_isal_level_buf_len(void) { return ISAL_DEF_LVL1_DEFAULT; }

/*
 * One gzip member (RFC 1952 header and trailer) of in[0..in_len] into
 * out[0..out_cap], at level 1, with level_buf of
 * profconv_isal_level_buf_len() bytes. Returns the member's length, or 0 if
 * it did not fit in out or ISA-L failed. in_len and out_cap are below 4 GiB
 * (the Rust side checks); profconv_isal_load returned 1 before. The stream
 * is slot's (which the caller holds alone), or on this stack when the
 * slots are not mapped.
 */
size_t profconv_isal_gzip(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          uint8_t *level_buf, size_t level_buf_len, size_t slot)
{
    struct isal_zstream on_stack;
    struct isal_zstream *stream = &on_stack;
    uintptr_t at = profconv_isal_slot_address(slot);
    if (at) {
        stream = (struct isal_zstream *)at;
    }
    init_fn(stream);
    stream->level = 1;
    stream->level_buf = level_buf;
    stream->level_buf_size = (uint32_t)level_buf_len;
    stream->end_of_stream = 1;
    stream->flush = NO_FLUSH;
    stream->gzip_flag = IGZIP_GZIP;
    stream->next_in = (uint8_t *)in; /* read only: ISA-L never writes its input */
    stream->avail_in = (uint32_t)in_len;
    stream->next_out = out;
    stream->avail_out = (uint32_t)out_cap;
    if (deflate_fn(stream) != COMP_OK || stream->avail_in != 0
        || stream->internal_state.state != ZSTATE_END) {
        return 0;
    }
    return stream->total_out;
}
