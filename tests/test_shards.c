/* test_shards.c: shard names (<subset>-NNNNN-of-NNNNN) and the check that a folder's shards form
 * one set: TensorFlow's names accepted, freely named files left alone, and each way two
 * conversions or an incomplete copy break a set reported with the files' names. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "io/shards.h"

TEST(shards_name_parse) {
    unsigned long i = 99, c = 99;
    const char *set = NULL;
    CHECK(shard_name_parse("train-00003-of-01024", "train", &i, &c, &set) == 1);
    CHECK(i == 3 && c == 1024 && set && strcmp(set, "-of-01024") == 0);
    CHECK(shard_name_parse("validation-00127-of-00128", "validation", &i, &c, NULL) == 1 && i == 127 && c == 128);
    CHECK(shard_name_parse("train-1-of-2.tfrecord", "train", &i, &c, &set) == 1);
    CHECK(i == 1 && c == 2 && strcmp(set, "-of-2.tfrecord") == 0);
    /* not shard names */
    const char *no[] = {"train",           "train-0.tfrecord",       "train-00000-of-",
                        "train-x-of-00002", "train-00000-00002",      "training-00000-of-00001",
                        "train_00000-of-00001", "train-0000000000-of-00002", "train-00000-of-0000000002",
                        "validation-00000-of-00001"};
    for (size_t k = 0; k < sizeof no / sizeof no[0]; k++)
        CHECK_MSG(shard_name_parse(no[k], "train", NULL, NULL, NULL) == 0, "%s parsed as a train shard", no[k]);
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* shard_set_check on a list of names; returns its status and leaves the message in err. */
static int check(const char *const *names, int n, const char *subset, char *err, size_t errlen) {
    return shard_set_check((char *const *)names, n, subset, err, errlen);
}

TEST(shards_complete_sets_and_free_names_pass) {
    char err[2048];
    /* build_imagenet_data.py's 1024 training shards */
    char **tf = malloc(1024 * sizeof *tf);
    for (int k = 0; k < 1024; k++) {
        tf[k] = malloc(32);
        snprintf(tf[k], 32, "train-%05d-of-01024", k);
    }
    CHECK_MSG(shard_set_check(tf, 1024, "train", err, sizeof err) == 0, "%s", err);
    /* one shard missing among 1024: named, with the count */
    char *gone = tf[517];
    memmove(tf + 517, tf + 518, (1024 - 518) * sizeof *tf);
    CHECK(shard_set_check(tf, 1023, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-00517-of-01024 is missing (1023 of the 1024 shards of train-*-of-01024 are here)") == 0,
              "got: %s", err);
    free(gone);
    for (int k = 0; k < 1023; k++) free(tf[k]);
    free(tf);

    const char *ext[] = {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"};
    CHECK_MSG(check(ext, 2, "train", err, sizeof err) == 0, "%s", err);
    const char *one[] = {"validation-00000-of-00001"};
    CHECK_MSG(check(one, 1, "validation", err, sizeof err) == 0, "%s", err);
    /* names outside the pattern: nothing to check, as the loader has always read them */
    const char *free_names[] = {"train-0.tfrecord", "train-1.tfrecord", "train-extra"};
    CHECK_MSG(check(free_names, 3, "train", err, sizeof err) == 0, "%s", err);
    CHECK(check(free_names, 0, "train", err, sizeof err) == 0);
}

TEST(shards_broken_sets_are_named) {
    char err[2048];
    /* two conversions side by side (sorted as a directory listing sorts them) */
    const char *two[] = {"train-00000-of-00002", "train-00000-of-00008", "train-00001-of-00002", "train-00001-of-00008",
                         "train-00002-of-00008", "train-00003-of-00008", "train-00004-of-00008", "train-00005-of-00008",
                         "train-00006-of-00008", "train-00007-of-00008"};
    CHECK(check(two, 10, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-* holds two sets of shards: train-00000-of-00002 ... (2 files) and "
                          "train-00000-of-00008 ... (8 files): remove one set") == 0,
              "got: %s", err);
    /* the same count, another tail: also two sets */
    const char *tails[] = {"train-00000-of-00001", "train-00000-of-00001.tfrecord", "train-00000-of-00001.idx"};
    CHECK(check(tails, 3, "train", err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "holds three sets of shards: train-00000-of-00001 ... (1 file), train-00000-of-00001.tfrecord "
                          "... (1 file) and train-00000-of-00001.idx ... (1 file): remove all sets but one"),
              "got: %s", err);
    /* gaps: the first three named, the rest counted */
    const char *gaps[] = {"train-00000-of-00008", "train-00002-of-00008", "train-00004-of-00008"};
    CHECK(check(gaps, 3, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-00001-of-00008, train-00003-of-00008, train-00005-of-00008 and 2 more are missing "
                          "(3 of the 8 shards of train-*-of-00008 are here)") == 0,
              "got: %s", err);
    const char *last[] = {"validation-00000-of-00002"};
    CHECK(check(last, 1, "validation", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "validation-00001-of-00002 is missing (1 of the 2 shards of validation-*-of-00002 is here)") == 0,
              "got: %s", err);
    const char *two_gone[] = {"train-00001-of-00003"};
    CHECK(check(two_gone, 1, "train", err, sizeof err) == -1);
    CHECK_MSG(starts(err, "train-00000-of-00003 and train-00002-of-00003 are missing ("), "got: %s", err);
    /* one shard under two spellings */
    const char *dup[] = {"train-00000-of-00002", "train-00001-of-00002", "train-1-of-00002"};
    CHECK(check(dup, 3, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-00001-of-00002 and train-1-of-00002 are both shard 1 of 2: remove one") == 0, "got: %s",
              err);
    /* an index beyond the count */
    const char *beyond[] = {"train-00000-of-00002", "train-00001-of-00002", "train-00002-of-00002"};
    CHECK(check(beyond, 3, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-00002-of-00002: shard index 2 is not below the count 2 of its set") == 0, "got: %s", err);
    /* a count of 0 names a shard (not a freely named file) whose index cannot be below it */
    const char *zero[] = {"train-00000-of-00000"};
    CHECK(check(zero, 1, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-00000-of-00000: shard index 0 is not below the count 0 of its set") == 0, "got: %s", err);
    /* stray files among shards */
    const char *stray[] = {"train-00000-of-00001", "train-notes.txt"};
    CHECK(check(stray, 2, "train", err, sizeof err) == -1);
    CHECK_MSG(strcmp(err, "train-notes.txt is not named as a shard (train-NNNNN-of-NNNNN) but would be read with "
                          "train-00000-of-00001 ...: move it away") == 0,
              "got: %s", err);
    const char *strays[] = {"train-0.tfrecord", "train-00000-of-00001", "train-a", "train-b", "train-c"};
    CHECK(check(strays, 5, "train", err, sizeof err) == -1);
    CHECK_MSG(starts(err, "train-0.tfrecord, train-a, train-b and 1 more are not named as shards "), "got: %s", err);
    /* a message longer than the buffer is cut, not overrun */
    char small[24];
    memset(small, 'x', sizeof small);
    CHECK(check(two, 10, "train", small, 16) == -1);
    CHECK(strlen(small) == 15 && small[16] == 'x');
}
