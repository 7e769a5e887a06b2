/* The floors' argument check, shared by floor.c and floor_uring.c. */
#ifndef FLOOR_POSITIVE_H
#define FLOOR_POSITIVE_H
#include <stdio.h>
#include <stdlib.h>

/* A positive whole number, or one line naming `program` and the wrong argument, and exit 2. */
static long positive(const char *program, const char *value, const char *name) {
    char *end;
    long number = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || number <= 0) {
        fprintf(stderr, "%s: %s must be a positive whole number, not '%s'\n", program, name, value);
        exit(2);
    }
    return number;
}
#endif
