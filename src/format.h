/* format.h - checkpoint formats (tmux's cmd_table[] is the model): one
 * descriptor per format, one table (format.c).  A descriptor says what
 * the format is called (inspect's word, and in prose for messages),
 * which files of a directory make it, where the model's config lives,
 * whether its files carry md5sums, and how it is loaded: once, over the
 * model's origin (origin.h), whatever that origin is. */
#ifndef TPL_FORMAT_H
#define TPL_FORMAT_H

#include "common.h"
#include "model.h"

#define TPL_FORMAT_MAX_PROBES 2

struct tpl__format {
  int id;           /* enum tpl__model_format */
  const char *name; /* inspect's word: "safetensors", "mlc", ... */
  const char *what; /* in prose: "an MLC weight directory" */
  /* A directory's files that make it this format, in the order looked
   * for (NULL after the last); the table's order, row by row, is the
   * order of them all. */
  const char *probes[TPL_FORMAT_MAX_PROBES + 1];
  const char *config; /* the member holding the model's config */
  int config_mlc;     /* that config is MLC's (mlc-chat-config.json) */
  int md5;            /* its file records carry md5sums (--verify-md5) */
  /* Builds m (its format, dir and origin set, no files yet) from member
   * `member` of its directory, one of `probes` (the safetensors row's
   * may be the model's own file's name), through m's origin: the JSON
   * fetched whole and parsed, the files it lists opened or probed and
   * checked.  `presharded`: an MLC cache of MLC's preshard layout is read
   * as it is.  Returns 0, the parsers' TPL_E* codes, or the origin's. */
  int (*load)(struct tpl__model *m, const char *member, int presharded,
              struct tpl__error *err);
  /* A MODEL that is one file of this format: its name ends so (NULL: a
   * directory format only).  Such a MODEL at a URL is loaded by `load`,
   * `member` its own name; a local one by load_file, from `path` as
   * given, as file `name` of m (a descriptor held, ckpt_files.h). */
  const char *file_suffix;
  int (*load_file)(const char *path, const char *name, struct tpl__model *m,
                   struct tpl__error *err);
  /* Optional: what inspect says after the name, in parentheses, of an
   * opened model of it ("tpload rank layout, 4 ranks"), into buf. */
  void (*detail)(const struct tpl__model *m, char *buf, size_t len);
};

/* The formats, in the order a directory is probed (a row without
 * probes is chosen by another's load). */
extern const struct tpl__format *const tpl__formats[];
extern const size_t tpl__nformats;

/* The format of a MODEL that is one file, `name` (its path or last URL
 * segment): the row whose file_suffix ends it, or, when none does, the
 * table's first single-file row (tpload reads any file as safetensors). */
const struct tpl__format *tpl__format_for_file(const char *name);

/* The descriptor of format `id` (enum tpl__model_format); NULL for none
 * (a model built by hand with format 0). */
const struct tpl__format *tpl__format_of(int id);

#endif
