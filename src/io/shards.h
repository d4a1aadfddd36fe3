/* shards.h: the names of TFRecord shards and whether a folder's shards form one set.
 *
 * A set of shards is named <subset>-<index>-of-<count><tail>, as TensorFlow's
 * build_imagenet_data.py and nvcnn-mkrecords write it (train-00000-of-01024 ... ,
 * train-01023-of-01024): the indexes 0 .. count-1 each once, the same count and the same tail
 * (usually "", sometimes an extension such as ".tfrecord") in every name. Two conversions into one
 * folder leave two sets side by side (train-*-of-00002 and train-*-of-00008); an interrupted copy
 * leaves a set with a gap. Both are what shard_set_check() reports.
 */
#ifndef NVCNN_IO_SHARDS_H
#define NVCNN_IO_SHARDS_H

#include <stddef.h>

/* Parses the file name `name` as <subset>-<index>-of-<count><tail>: index and count are 1 to 9
 * decimal digits and count > 0. Returns 1 and sets *index, *count and *set (the text from "-of-"
 * on: two shards are of one set when their *set strings are equal), or 0 when the name does not
 * follow the pattern. Any of the outputs may be NULL. */
int shard_name_parse(const char *name, const char *subset, unsigned long *index, unsigned long *count,
                     const char **set);

/* Whether the file names `names` (the n files <subset>-* of a folder, sorted by strcmp) form one
 * set that the loader can read. Either none of them follows the pattern (names chosen freely,
 * such as train-0.tfrecord and train-1.tfrecord: nothing to check), or all of them do, with one
 * count and one tail and every index 0 .. count-1 exactly once. Returns 0, or -1 with a one-line
 * description naming the files in err (two sets, a missing shard, a duplicate, an index beyond its
 * count, a file whose name does not follow the pattern among shards that do). */
int shard_set_check(char *const *names, int n, const char *subset, char *err, size_t errlen);

#endif
