/* profile_embed.h — private: the builtin profiles/gpus/NAME.json texts, generated
 * into the build tree by embed.cmake. Only profile.c reads these. */
#ifndef ULTRAPLAN_PROFILES_EMBED_H
#define ULTRAPLAN_PROFILES_EMBED_H

extern const int profile_embed_count;
extern const char *const profile_embed_names[];   // file name without .json, sorted
extern const char *const profile_embed_texts[];   // NUL-terminated JSON text
/* the same for profiles/stacks/NAME.json (only stacks.c reads these) */
extern const int stack_embed_count;
extern const char *const stack_embed_names[];
extern const char *const stack_embed_texts[];

#endif
